//! Symbolication of fixtures/callsites.c compiled at test time (gcc and clang, -O0 and -O2, PIE
//! and not): the call site `helper(argc)` in main, found by its return address, must be named
//! `main` at `callsites.c:<line of CALL_SITE>` from the DWARF, from a separate debug file (by
//! `.gnu_debuglink` and by build-id), as `main+0x…` when stripped with dynamic symbols, and as
//! the bare address when stripped of everything. The CFA rule at helper's entry is rsp + 8 with
//! the return address at CFA − 8.

use std::path::{Path, PathBuf};

use cilkview_fixtures::{build, fixtures_dir, has_compiler, has_tool, skip, BuildOptions};
use cilkview_symbols::{CfaRule, Symbolizer};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol};

fn call_line() -> u32 {
    let src = std::fs::read_to_string(fixtures_dir().join("callsites.c")).unwrap();
    src.lines().position(|l| l.contains("CALL_SITE")).unwrap() as u32 + 1
}

/// File-relative offsets of helper's entry and of the return address of main's call to it.
fn offsets(exe: &Path) -> (u64, u64) {
    let data = std::fs::read(exe).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let base = file.segments().map(|s| s.address()).min().unwrap() & !0xfff;
    let sym = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .unwrap_or_else(|| panic!("no symbol {name}"))
    };
    let (helper, main) = (sym("helper"), sym("main"));
    let text = file.section_by_name(".text").unwrap();
    let bytes = text.data().unwrap();
    let start = (main.address() - text.address()) as usize;
    let code = &bytes[start..start + main.size() as usize];
    // `call rel32` (e8) whose target is helper.
    let ret = (0..code.len().saturating_sub(4))
        .find_map(|i| {
            let rel = i32::from_le_bytes(code.get(i + 1..i + 5)?.try_into().ok()?);
            let next = main.address() + i as u64 + 5;
            (code[i] == 0xe8 && next.wrapping_add_signed(rel as i64) == helper.address())
                .then_some(next)
        })
        .expect("main calls helper");
    (helper.address() - base, ret - base)
}

fn variants() -> Vec<(String, BuildOptions)> {
    let mut out = Vec::new();
    for cc in ["gcc", "clang"] {
        if !has_compiler(cc) {
            skip(format!("{cc} is not installed"));
            continue;
        }
        for opt in ["0", "2"] {
            for pie in [true, false] {
                let o = BuildOptions::default()
                    .compiler(cc)
                    .opt(opt)
                    .pie(pie)
                    .flag("-Wl,--build-id");
                out.push((format!("{cc} -O{opt} pie={pie}"), o));
            }
        }
    }
    out
}

fn copy(exe: &Path, dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::copy(exe, &p).unwrap();
    p
}

fn tool(cmd: &str, args: &[&str]) {
    let st = cilkview_fixtures::command(cmd).args(args).status().unwrap();
    assert!(st.success(), "{cmd} {args:?}");
}

#[test]
#[ignore = "slow: compiles C programs"]
fn call_site_named_from_dwarf() {
    let line = call_line();
    for (what, o) in variants() {
        let exe = build("callsites", &o);
        let (helper, ret) = offsets(&exe);
        let s = Symbolizer::open(&exe).unwrap();
        assert!(s.has_dwarf() && s.debug_file().is_none(), "{what}");
        let site = s.lookup_return_address(ret);
        assert_eq!(site.function.as_deref(), Some("main"), "{what}: {site:?}");
        assert_eq!(site.line, Some(line), "{what}: {site:?}");
        // The fixtures crate compiles a copy named callsites.<unique>.c.
        let file = Path::new(site.file.as_deref().unwrap())
            .file_name()
            .unwrap();
        let file = file.to_str().unwrap();
        assert!(
            file.starts_with("callsites.") && file.ends_with(".c"),
            "{what}: {site:?}"
        );
        assert_eq!(
            site.location(),
            format!("{}:{line}", site.file.clone().unwrap())
        );
        assert_eq!(site.offset, ret);
        let h = s.lookup(helper);
        assert_eq!(h.function.as_deref(), Some("helper"), "{what}");
        assert_eq!(h.symbol, Some(("helper".to_string(), 0)), "{what}");
    }
}

#[test]
#[ignore = "slow: compiles C programs, runs objcopy"]
fn separate_debug_files_by_debuglink_and_build_id() {
    if !has_tool("objcopy") {
        return skip("objcopy is not installed");
    }
    let line = call_line();
    for (what, o) in variants() {
        let exe = build("callsites", &o);
        let (_, ret) = offsets(&exe);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // .gnu_debuglink, debug file beside the program.
        let prog = copy(&exe, d, "prog");
        let debug = d.join("prog.debug");
        let (p, dbg) = (prog.to_str().unwrap(), debug.to_str().unwrap());
        tool("objcopy", &["--only-keep-debug", p, dbg]);
        tool(
            "objcopy",
            &["--strip-all", "--remove-section=.note.gnu.build-id"]
                .iter()
                .copied()
                .chain([p])
                .collect::<Vec<_>>(),
        );
        tool("objcopy", &[&format!("--add-gnu-debuglink={dbg}"), p]);
        let s = Symbolizer::open_with_debug_root(&prog, &d.join("none")).unwrap();
        assert_eq!(s.debug_file(), Some(debug.as_path()), "{what}");
        let site = s.lookup_return_address(ret);
        assert_eq!(
            (site.function.as_deref(), site.line),
            (Some("main"), Some(line)),
            "{what}"
        );

        // Build-id, debug file under ROOT/.build-id/xx/yyyy.debug.
        let stripped = copy(&exe, d, "stripped");
        let st = stripped.to_str().unwrap();
        tool("objcopy", &["--strip-all", st]);
        let data = std::fs::read(&exe).unwrap();
        let id: String = object::File::parse(&*data)
            .unwrap()
            .build_id()
            .unwrap()
            .expect("a build-id")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let root = d.join("debug");
        let by_id = root.join(".build-id").join(&id[..2]);
        std::fs::create_dir_all(&by_id).unwrap();
        let target = by_id.join(format!("{}.debug", &id[2..]));
        std::fs::copy(&debug, &target).unwrap();
        let s = Symbolizer::open_with_debug_root(&stripped, &root).unwrap();
        assert_eq!(s.debug_file(), Some(target.as_path()), "{what}");
        let site = s.lookup_return_address(ret);
        assert_eq!(
            (site.function.as_deref(), site.line),
            (Some("main"), Some(line)),
            "{what}"
        );
    }
}

#[test]
#[ignore = "slow: compiles C programs, runs strip"]
fn stripped_falls_back_to_symbol_then_address() {
    if !has_tool("strip") {
        return skip("strip is not installed");
    }
    for (what, o) in variants() {
        let dir = tempfile::tempdir().unwrap();
        // With dynamic symbols (-rdynamic exports main): main+0x….
        let exe = build("callsites", &o.clone().flag("-rdynamic"));
        let (_, ret) = offsets(&exe);
        let prog = copy(&exe, dir.path(), "dyn");
        tool("strip", &["--strip-all", prog.to_str().unwrap()]);
        let s = Symbolizer::open_with_debug_root(&prog, dir.path()).unwrap();
        assert!(!s.has_dwarf(), "{what}");
        let site = s.lookup_return_address(ret);
        let (name, off) = site.symbol.clone().expect("a dynamic symbol");
        assert_eq!(name, "main", "{what}");
        assert_eq!(site.location(), format!("main+{off:#x}"), "{what}");
        assert_eq!(site.function_name(), "main");

        // Nothing left: the address.
        let exe = build("callsites", &o);
        let (_, ret) = offsets(&exe);
        let prog = copy(&exe, dir.path(), "bare");
        tool("strip", &["--strip-all", prog.to_str().unwrap()]);
        let s = Symbolizer::open_with_debug_root(&prog, dir.path()).unwrap();
        let site = s.lookup_return_address(ret);
        assert_eq!(site.symbol, None, "{what}");
        assert_eq!(site.location(), format!("{ret:#x}"), "{what}");
        assert_eq!(site.function_name(), "??");
    }
}

#[test]
#[ignore = "slow: compiles C programs"]
fn return_address_rule_at_function_entry() {
    for (what, o) in variants() {
        let exe = build("callsites", &o);
        let (helper, _) = offsets(&exe);
        let s = Symbolizer::open(&exe).unwrap();
        let rule = s.return_address_rule(helper).unwrap();
        assert_eq!(
            rule.cfa,
            CfaRule::RegisterOffset {
                register: 7,
                name: "rsp",
                offset: 8
            },
            "{what}"
        );
        assert_eq!(rule.return_address_offset, -8, "{what}");
        // At entry the return address is at the stack pointer.
        assert_eq!(rule.slot(0x7fff_0000), 0x7fff_0000);
        // Inside main at -O0, after its prologue: the frame pointer's rule.
        if what.contains("-O0") {
            let (_, ret) = offsets(&exe);
            let rule = s.return_address_rule(ret - 5).unwrap();
            assert_eq!(
                rule.cfa,
                CfaRule::RegisterOffset {
                    register: 6,
                    name: "rbp",
                    offset: 16
                },
                "{what}"
            );
            assert_eq!(rule.slot(0x1000), 0x1008);
        }
        // No CFI far outside the program.
        assert!(s.return_address_rule(1 << 40).is_err());
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("not-elf");
    std::fs::write(&p, b"hello").unwrap();
    let e = Symbolizer::open(&p).err().unwrap();
    assert!(e.to_string().contains("not an ELF file"), "{e}");
    assert!(Symbolizer::open(&dir.path().join("missing")).is_err());
}
