#![no_main]
//! `cargo +nightly fuzz run parse_marks` from crates/cilkview-marks/fuzz (needs
//! `cargo install cargo-fuzz`). Any input: parse_marks must return, never panic.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(image) = cilkview_marks::parse_marks(data) {
        for mark in &image.marks {
            let _ = mark.offset(&image);
        }
    }
});
