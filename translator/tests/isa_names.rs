//! The instruction table builds, and `isa/names.rs` is what the generator
//! makes of it (regenerate with
//! `UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test isa_names`).

use ptxvk_translator::isa;

#[test]
fn table_builds_without_errors() {
    let t = isa::table();
    let errors: Vec<String> = t.errors.iter().map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    assert!(t.instructions.len() > 150, "{} instructions", t.instructions.len());
}

#[test]
fn names_rs_is_up_to_date() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/isa/names.rs");
    let want = match isa::gen::names_rs(isa::table::TEXT) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    };
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, want).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        } else {
            panic!(
                "{} is stale; regenerate with UPDATE_GOLDEN=1 cargo test -p ptxvk-translator --test isa_names",
                path.display()
            );
        }
    }
}

#[test]
fn special_registers_round_trip() {
    for r in isa::SpecialRegister::all() {
        assert_eq!(isa::SpecialRegister::from_name(&r.name()), Some(r), "{}", r.name());
    }
}
