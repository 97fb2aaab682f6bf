# shellcheck shell=bash
# The Barcelona OpenMP Tasks Suite (BOTS), for the scripts that measure it (bench-bots.sh,
# validate-speedup.sh): where its checkout is, its programs, and how one is built with
# gcc -fopenmp -O3 from BOTS's own sources. Sourced, not run.
#
# BOTS is GPL-2: it is not in this repository. bots_locate takes a checkout of it, or clones
# https://github.com/bsc-pm/bots at $BOTS_COMMIT into a folder it is given.

BOTS_COMMIT=2607a695128727a3f6c98754367705443663136d

# bots_locate DIR_OR_EMPTY SCRATCH: sets $bots (the checkout) and $bots_inputs (its inputs/).
bots_locate() {
    if [ -n "$1" ]; then
        bots=$(cd "$1" && pwd)
    else
        git clone -q https://github.com/bsc-pm/bots "$2/bots"
        git -C "$2/bots" checkout -q "$BOTS_COMMIT" 2>/dev/null || true
        bots=$2/bots
    fi
    if [ ! -f "$bots/common/bots_main.c" ]; then
        echo "error: $bots is not a BOTS checkout" >&2
        return 2
    fi
    bots_inputs=$bots/inputs
}

# The programs: name | folder under omp-tasks | sources | defines | libraries | arguments, where
# $in in the arguments is BOTS's inputs folder. bench-bots.sh measures all of them (with -c,
# BOTS's own check); validate-speedup.sh the ones it names.
bots_programs() {
    cat <<'TABLE'
fib|fib|fib.c|||-n 30
fib-manual|fib|fib.c|-DMANUAL_CUTOFF||-n 32 -x 12
nqueens|nqueens|nqueens.c|||-n 10
nqueens-manual|nqueens|nqueens.c|-DMANUAL_CUTOFF||-n 12
nqueens-final|nqueens|nqueens.c|-DFINAL_CUTOFF||-n 12
nqueens-if|nqueens|nqueens.c|-DIF_CUTOFF||-n 12
sort|sort|sort.c|||-n 4194304
fft|fft|fft.c||-lm|-n 1048576
health|health|health.c||-lm|-f $in/health/test.input
health-manual|health|health.c|-DMANUAL_CUTOFF|-lm|-f $in/health/small.input
sparselu-single|sparselu/sparselu_single|sparselu.c|||-n 50 -m 50
sparselu-for|sparselu/sparselu_for|sparselu.c|||-n 50 -m 50
strassen-manual|strassen|strassen.c|-DMANUAL_CUTOFF||-n 1024
alignment-single|alignment/alignment_single|alignment.c sequence.c||-lm|-f $in/alignment/prot.20.aa
alignment-for|alignment/alignment_for|alignment.c sequence.c||-lm|-f $in/alignment/prot.20.aa
uts|uts|uts.c brg_sha1.c||-lm|-f $in/uts/test.input
floorplan-manual|floorplan|floorplan.c|-DMANUAL_CUTOFF||-f $in/floorplan/input.15
knapsack-manual|knapsack|knapsack.c|-DMANUAL_CUTOFF||-f $in/knapsack/knapsack-024.input
TABLE
}

# bots_args ARGS: the table's arguments with $in made BOTS's inputs folder.
bots_args() {
    printf '%s\n' "${1//\$in/$bots_inputs}"
}

# bots_build NAME FOLDER SOURCES DEFINES LIBRARIES OUT: builds one program (NAME: the table's, for the reader) into OUT (objects
# beside it), with $BOTS_CC (gcc, the default, or clang: LLVM's libomp).
bots_build() {
    local dir=$2 sources=$3 defines=$4 libs=$5 exe=$6 s o
    local src=$bots/omp-tasks/$dir cc=${BOTS_CC:-gcc}
    local info=(-DCDATE='""' -DCC="\"$cc -fopenmp\"" -DLD="\"$cc -fopenmp\"" -DCMESSAGE='""'
        -DCFLAGS='"-O3"' -DLDFLAGS='""')
    local objs=()
    for s in "$bots/common/bots_main.c" "$bots/common/bots_common.c" $sources; do
        [ "${s#/}" = "$s" ] && s=$src/$s
        o=$exe.$(basename "$s" .c).o
        # shellcheck disable=SC2086
        "$cc" -O3 -fopenmp -w -c -I"$bots/common" -I"$src" $defines "${info[@]}" "$s" -o "$o"
        objs+=("$o")
    done
    # shellcheck disable=SC2086
    "$cc" -O3 -fopenmp "${objs[@]}" -o "$exe" $libs
}
