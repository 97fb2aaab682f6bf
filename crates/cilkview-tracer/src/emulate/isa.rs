//! Instructions the emulated CPU ([`super::CPU_MODEL`]: Haswell, with QEMU 7.2's TCG) lacks:
//! AVX-512 (EVEX-encoded), which a program built with `-march=native` on an AVX-512 host runs
//! unconditionally and which dies of SIGILL under the emulator. Found by decoding the
//! executable's code sections (a linear sweep), before anything runs.

use std::path::Path;

use iced_x86::{Code, Decoder, DecoderOptions, EncodingKind, Formatter, Instruction};

/// The first AVX-512 instruction of `program`'s code in a function of its symbol table, other
/// than those a library selects by `cpuid` (glibc's `*_evex*`/`*_avx512*` string functions,
/// linked into static programs and never chosen on the emulated CPU): its text, address and
/// function, as one phrase. A stripped program's code is not judged.
pub fn lacking_instruction(program: &Path) -> Option<String> {
    use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind};
    let data = std::fs::read(program).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let mut functions: Vec<(u64, u64, String)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
        .collect();
    functions.sort_unstable();
    let function_of = |ip: u64| {
        let i = functions.partition_point(|f| f.0 <= ip).checked_sub(1)?;
        let (start, size, name) = &functions[i];
        (ip < start + size).then_some(name.as_str())
    };
    let dispatched = |name: &str| {
        let n = name.to_ascii_lowercase();
        n.contains("evex") || n.contains("avx512")
    };
    for section in file.sections().filter(|s| s.kind() == SectionKind::Text) {
        let code = section.data().ok()?;
        let mut decoder = Decoder::with_ip(64, code, section.address(), DecoderOptions::NONE);
        let mut instruction = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut instruction);
            if instruction.code() == Code::INVALID || instruction.encoding() != EncodingKind::EVEX {
                continue;
            }
            let ip = instruction.ip();
            // Outside a named function (a stripped program) it cannot be told from a library's
            // variant chosen by `cpuid`: not counted.
            let Some(function) = function_of(ip).filter(|f| !dispatched(f)) else {
                continue;
            };
            let mut text = String::new();
            iced_x86::GasFormatter::new().format(&instruction, &mut text);
            return Some(format!("`{text}` at {ip:#x} in {function}"));
        }
    }
    None
}
