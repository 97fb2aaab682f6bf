//! Core counts: parsing `--cores LIST`, and which CPUs a run at P workers is bound to.

use nix::sched::{sched_getaffinity, CpuSet};
use nix::unistd::Pid;

use crate::BenchError;

/// The largest worker count accepted (nix's `CpuSet` holds 1024 CPUs; a P beyond the CPUs
/// available is refused anyway unless oversubscribing).
pub const MAX_CORES: u32 = 1024;

/// The CPUs this process may run on (its affinity mask), in increasing order.
pub fn available_cpus() -> Result<Vec<usize>, BenchError> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(BenchError::Affinity)?;
    Ok((0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect())
}

/// Parses a core list: comma-separated counts and inclusive ranges, e.g. `1,2,4` or `1-8`
/// or `1,4-6`. The result is sorted, without duplicates. Every count must be in
/// `1..=MAX_CORES`.
pub fn parse_cores(list: &str) -> Result<Vec<u32>, String> {
    const FORM: &str = "expected core counts such as 1,2,4 or 1-8";
    let count = |s: &str| -> Result<u32, String> {
        let n: u32 = s
            .trim()
            .parse()
            .map_err(|_| format!("`{}` is not a core count ({FORM})", s.trim()))?;
        if n == 0 || n > MAX_CORES {
            return Err(format!("core count {n} is out of range 1-{MAX_CORES}"));
        }
        Ok(n)
    };
    let mut out = Vec::new();
    for item in list.split(',') {
        if item.trim().is_empty() {
            return Err(format!("empty item in core list `{list}` ({FORM})"));
        }
        match item.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (count(a)?, count(b)?);
                if a > b {
                    return Err(format!("range {a}-{b} is backwards ({FORM})"));
                }
                out.extend(a..=b);
            }
            None => out.push(count(item)?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The CPUs a run with `cores` workers is bound to: the first `cores` of `available`, or all
/// of them when oversubscribing beyond them.
pub fn cpu_set(available: &[usize], cores: u32) -> Result<CpuSet, BenchError> {
    let mut set = CpuSet::new();
    for &cpu in available.iter().take(cores as usize) {
        set.set(cpu).map_err(BenchError::Affinity)?;
    }
    Ok(set)
}

/// A set of exactly one CPU.
pub fn single_cpu(cpu: usize) -> Result<CpuSet, BenchError> {
    let mut set = CpuSet::new();
    set.set(cpu).map_err(BenchError::Affinity)?;
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lists_and_ranges() {
        assert_eq!(parse_cores("1,2,4").unwrap(), vec![1, 2, 4]);
        assert_eq!(parse_cores("1-4").unwrap(), vec![1, 2, 3, 4]);
        assert_eq!(parse_cores("8, 1-2,2").unwrap(), vec![1, 2, 8]);
        assert_eq!(parse_cores("256").unwrap(), vec![256]);
        for bad in ["", "0", "1,,2", "a", "4-2", "1-", "-3", "2000", "1.5"] {
            assert!(parse_cores(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_set_of_256_cpus_is_representable() {
        let cpus: Vec<usize> = (0..256).collect();
        let set = cpu_set(&cpus, 256).unwrap();
        assert!(set.is_set(255).unwrap());
        assert!(!set.is_set(256).unwrap());
    }
}
