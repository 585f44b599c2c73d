//! include/timehands.h is what cbindgen makes of src/ with cbindgen.toml: this
//! test makes it again and fails when the committed header differs, so the
//! header cannot fall out of date with the Rust side.
//!
//! After a change to the C API, rewrite the header with
//! `TIMEHANDS_BLESS=1 cargo test -p timehands-ffi --test header`.

use std::path::Path;

#[test]
fn the_header_is_what_cbindgen_makes_of_the_source() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("cbindgen.toml is readable and valid");
    // From the source files alone: no `cargo metadata`, so no second cargo
    // inside this test (the header names libc's types, it does not expand them).
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(crate_dir.join("src/lib.rs"))
        .generate()
        .expect("cbindgen parses src/");
    let mut generated = Vec::new();
    bindings.write(&mut generated);

    let header = crate_dir.join("include/timehands.h");
    if std::env::var_os("TIMEHANDS_BLESS").is_some() {
        std::fs::write(&header, &generated).expect("include/timehands.h is writable");
        return;
    }
    let committed = std::fs::read(&header).unwrap_or_default();
    assert!(
        committed == generated,
        "include/timehands.h is out of date with src/ (or missing): rewrite it with \
         `TIMEHANDS_BLESS=1 cargo test -p timehands-ffi --test header` and commit it.\n\
         cbindgen makes:\n{}",
        String::from_utf8_lossy(&generated)
    );
}
