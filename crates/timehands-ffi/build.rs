//! The shared library's SONAME, `libtimehands.so.MAJOR` (the crate's major
//! version): programs linked with it load the library of that ABI, whatever
//! minor version `make install` put beside it.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = env!("CARGO_PKG_VERSION_MAJOR");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtimehands.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
