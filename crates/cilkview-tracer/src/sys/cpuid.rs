//! The `cpuid` instruction.

/// `cpuid` with `leaf` in eax and `subleaf` in ecx: [eax, ebx, ecx, edx].
pub fn cpuid(leaf: u32, subleaf: u32) -> [u32; 4] {
    // SAFETY: `cpuid` exists on every x86-64 CPU, reads only eax/ecx and writes only the four
    // registers the intrinsic returns (the intrinsic is safe from Rust 1.87; the crate's MSRV
    // is older).
    #[allow(unused_unsafe)]
    let r = unsafe { std::arch::x86_64::__cpuid_count(leaf, subleaf) };
    [r.eax, r.ebx, r.ecx, r.edx]
}
