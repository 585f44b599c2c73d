//! libtimehands from C: compiles C programs with the system's C compiler (`cc`,
//! or `$CC`) against include/timehands.h and libtimehands.a, linked with the
//! libraries timehands.pc declares, and runs them: tests/c/api.c checks the
//! API against clock_gettime, tests/c/signals.c calls it in a signal
//! handler that interrupts it, the benchmark of examples/c must build and
//! print both figures, and tests/c/api.cpp, built by the C++ compiler (`c++`,
//! or `$CXX`), must link and call the functions.
//!
//! Cargo builds libtimehands.a with the crate's rlib, as a dependency of this
//! test, into the directory this test runs from (`target/<profile>/deps`): so
//! the library is always the one of this build, and no second cargo is run.
// Miri cannot run a C compiler; tests/c/api.c checks Linux's clock ids, and
// timehands.pc's Libs.private is Linux glibc's (README.md, "Each OS").
#![cfg(all(not(miri), target_os = "linux"))]

use std::ffi::OsString;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The static library cargo built beside this test's executable.
fn static_library() -> PathBuf {
    built("libtimehands.a")
}

/// The library `name` cargo built beside this test's executable.
fn built(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test knows its executable");
    let lib = exe
        .parent()
        .expect("the test executable is in a directory")
        .join(name);
    assert!(
        lib.is_file(),
        "{} is missing: cargo builds it beside the tests, from timehands-ffi's \
         crate-type",
        lib.display()
    );
    lib
}

/// A field of timehands.pc, such as `Libs.private`.
fn pc_field(name: &str) -> String {
    let pc = std::fs::read_to_string(crate_dir().join("timehands.pc"))
        .expect("timehands.pc is readable");
    let prefix = format!("{name}:");
    pc.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("timehands.pc has no {name} field"))
        .trim()
        .to_string()
}

/// A compiler and the language standard it is held to.
struct Compiler {
    /// The variable that names it, as make's.
    variable: &'static str,
    /// The command when the variable is unset.
    default: &'static str,
    /// Its `-std=`.
    standard: &'static str,
}

const C: Compiler = Compiler {
    variable: "CC",
    default: "cc",
    standard: "-std=c11",
};

const CXX: Compiler = Compiler {
    variable: "CXX",
    default: "c++",
    standard: "-std=c++11",
};

/// Compiles `source` into `exe` against the header and the static library.
fn compile(compiler: &Compiler, source: &Path, exe: &Path) {
    let mut libraries = vec![static_library().into_os_string()];
    libraries.extend(
        pc_field("Libs.private")
            .split_whitespace()
            .map(OsString::from),
    );
    compile_with(compiler, source, exe, &libraries);
}

/// Compiles `source` into `exe` against the header, linked with `libraries`.
fn compile_with(compiler: &Compiler, source: &Path, exe: &Path, libraries: &[OsString]) {
    let cc =
        std::env::var_os(compiler.variable).unwrap_or_else(|| OsString::from(compiler.default));
    let mut command = Command::new(&cc);
    command
        .args([
            compiler.standard,
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-O2",
        ])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(source)
        .args(libraries)
        .arg("-o")
        .arg(exe);
    let output = match command.output() {
        Ok(output) => output,
        Err(e) if e.kind() == ErrorKind::NotFound => panic!(
            "no compiler: {cc:?} was not found. This test compiles {} against \
             include/timehands.h; install one or name it in ${}",
            source.display(),
            compiler.variable
        ),
        Err(e) => panic!("{cc:?} could not be run: {e}"),
    };
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn run(exe: &Path, args: &[&str]) -> Output {
    Command::new(exe)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{} could not be run: {e}", exe.display()))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Checks that the program `what` succeeded with an output that
/// `looks_right`, or shows all it said.
fn assert_passed(output: &Output, what: &str, looks_right: impl Fn(&str) -> bool) {
    let stdout = text(&output.stdout);
    assert!(
        output.status.success() && looks_right(&stdout),
        "{what} failed ({}):\n{stdout}{}",
        output.status,
        text(&output.stderr)
    );
}

/// On the counter this machine chooses, and on the kernel's clock (the
/// fallback, whose `th_info` names a reason).
#[test]
fn the_c_api_behaves_like_clock_gettime() {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timehands-c-api");
    compile(&C, &crate_dir().join("tests/c/api.c"), &exe);
    for counter in [None, Some("kernel")] {
        let mut command = Command::new(&exe);
        match counter {
            Some(name) => command.env("TIMEHANDS_COUNTER", name),
            None => command.env_remove("TIMEHANDS_COUNTER"),
        };
        let output = command
            .output()
            .unwrap_or_else(|e| panic!("{} could not be run: {e}", exe.display()));
        assert_passed(
            &output,
            &format!("tests/c/api.c with TIMEHANDS_COUNTER={counter:?}"),
            |stdout| stdout.ends_with(" passed, 0 failed\n"),
        );
    }
}

/// tests/c/api.c in a process whose time comes from a keeper's page: a
/// keeper (this test process, as `timehands keeper` would) publishes on a
/// private page, and the C program, told of it by `TIMEHANDS_PAGE`, passes
/// every check against clock_gettime with its time read from the page, as
/// `th_info` says.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_c_api_reads_a_keepers_page_and_behaves_like_clock_gettime() {
    use std::os::unix::fs::PermissionsExt;
    use std::time::{Duration, Instant};
    use timehands_rs::keeper::{Keeper, published};

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("timehands-c-api-page-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a directory for the page");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
        .expect("its mode: writable by its owner alone");
    let page = dir.join("page");
    let keeper = Keeper::create(&page).expect("the keeper makes its page");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timehands-c-api-on-a-page");
    compile(&C, &crate_dir().join("tests/c/api.c"), &exe);
    let done = std::sync::atomic::AtomicBool::new(false);
    let output = std::thread::scope(|s| {
        s.spawn(|| {
            // Kept a tenth of a second at a time, until the program is done.
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let until = Instant::now() + Duration::from_millis(100);
                let Ok(()) = keeper.keep(Some(until), |_| Ok::<(), std::convert::Infallible>(()));
            }
        });
        let limit = Instant::now() + Duration::from_secs(10);
        while !published(&page) && Instant::now() < limit {
            std::thread::sleep(Duration::from_millis(5));
        }
        let output = Command::new(&exe)
            .env("TIMEHANDS_PAGE", &page)
            .env_remove("TIMEHANDS_COUNTER")
            .output();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        output
    });
    let _ = std::fs::remove_dir_all(&dir);
    let output = output.unwrap_or_else(|e| panic!("{} could not be run: {e}", exe.display()));
    assert_passed(&output, "tests/c/api.c on a keeper's page", |stdout| {
        stdout.contains("time from the keeper's page") && stdout.ends_with(" passed, 0 failed\n")
    });
}

/// `th_clock_gettime` of every clock in a SIGPROF handler, 20 000 times a
/// second from before the first read, while two threads call `malloc` and
/// `th_clock_gettime`: no process hangs (tests/c/signals.c, which tells a
/// hang, reading threads that make no round for 5 s, from a slow process,
/// and exits 3 for one). `timehands signals --program` runs the same
/// program by the thousand.
#[test]
fn th_clock_gettime_in_a_signal_handler_never_hangs() {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timehands-c-signals");
    compile(&C, &crate_dir().join("tests/c/signals.c"), &exe);
    for (rate, processes) in [("1000", 10), ("20000", 40)] {
        for _ in 0..processes {
            let output = run(&exe, &[rate, "150"]);
            assert_passed(&output, &format!("tests/c/signals.c at {rate} Hz"), |_| {
                true
            });
        }
    }
}

/// What tests/c/callers.c printed of the clock after one kind of reader
/// read: its `CALLER` line's fields by name.
fn caller_fields(stdout: &str) -> std::collections::HashMap<String, String> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("CALLER "))
        .unwrap_or_else(|| panic!("no CALLER line in {stdout}"));
    line.split_whitespace()
        .filter_map(|word| word.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `th_clock_gettime` from every kind of thread, in a process of its own
/// each (tests/c/callers.c): a thread that blocks every signal, a daemon's
/// that blocks SIGHUP and SIGTERM but around a `ppoll`, and a process whose
/// only reads are in a SIGPROF handler get the clock an ordinary thread's
/// reads get: the same counter, a bound within twice its (and the 5 µs a
/// loaded machine's brackets may add), about as many windups (the clock
/// once stayed on the kernel's clock for such threads, winding up every
/// 50 µs); and the library starts no thread for any.
#[test]
fn th_clock_gettime_gives_every_caller_the_same_clock() {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timehands-c-callers");
    compile(&C, &crate_dir().join("tests/c/callers.c"), &exe);
    let became = |kind: &str| {
        let output = run(&exe, &[kind, "300"]);
        assert_passed(&output, &format!("tests/c/callers.c {kind}"), |stdout| {
            stdout.contains("CALLER ")
        });
        caller_fields(&text(&output.stdout))
    };
    let number = |fields: &std::collections::HashMap<String, String>, name: &str| -> u64 {
        fields[name].parse().expect("a number")
    };
    let ordinary = became("ordinary");
    for kind in ["blocked", "daemon", "handler"] {
        let this = became(kind);
        println!("{kind}: {this:?}; ordinary: {ordinary:?}");
        assert_eq!(this["counter"], ordinary["counter"], "{kind}");
        assert!(
            number(&this, "accuracy_ns") <= 2 * number(&ordinary, "accuracy_ns") + 5_000,
            "{kind}: {this:?}, ordinary {ordinary:?}"
        );
        assert!(
            number(&this, "windups") <= 4 * number(&ordinary, "windups") + 100,
            "{kind}: {this:?}, ordinary {ordinary:?}"
        );
        assert_eq!(this["threads_before"], this["threads_after"], "{kind}");
    }
}

#[test]
fn the_example_benchmark_prints_both_figures() {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timehands-clock-gettime-bench");
    compile(
        &C,
        &crate_dir().join("examples/c/clock-gettime-bench.c"),
        &exe,
    );

    let output = run(&exe, &["1000"]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", text(&output.stderr));
    let names: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains("\t1000\t"))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(names, ["clock_gettime", "th_clock_gettime"], "{stdout}");

    for bad in ["0", "ten", "99999999999999999999"] {
        let output = run(&exe, &[bad]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "count {bad}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "count {bad}: {stderr}");
        assert!(stderr.contains(bad), "count {bad}: {stderr}");
    }
}

/// A program linked with `-ltimehands` needs the library by its SONAME,
/// libtimehands.so.0, which `make install` links to the versioned file.
#[test]
#[cfg_attr(
    target_feature = "crt-static",
    ignore = "a static target (musl's default) builds no .so: README.md, \"Each OS\""
)]
fn the_shared_library_is_loaded_by_its_soname() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timehands-soname");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the test's directory can be made");
    std::fs::copy(built("libtimehands.so"), dir.join("libtimehands.so.0.1.0"))
        .expect("the shared library can be copied");
    std::os::unix::fs::symlink("libtimehands.so.0.1.0", dir.join("libtimehands.so"))
        .expect("the link can be made");
    let exe = dir.join("bench");
    let mut libraries = vec![OsString::from("-L"), dir.clone().into_os_string()];
    let mut rpath = OsString::from("-Wl,-rpath,");
    rpath.push(&dir);
    libraries.extend([rpath, OsString::from("-ltimehands")]);
    compile_with(
        &C,
        &crate_dir().join("examples/c/clock-gettime-bench.c"),
        &exe,
        &libraries,
    );

    let output = run(&exe, &["1000"]);
    assert!(
        !output.status.success() && text(&output.stderr).contains("libtimehands.so.0"),
        "ran without libtimehands.so.0, the SONAME: {}",
        text(&output.stderr)
    );
    std::os::unix::fs::symlink("libtimehands.so.0.1.0", dir.join("libtimehands.so.0"))
        .expect("the link can be made");
    let output = run(&exe, &["1000"]);
    assert_passed(
        &output,
        "the program linked with libtimehands.so",
        |stdout| stdout.contains("th_clock_gettime\t1000\t"),
    );
}

/// The header is C++ too: its declarations in `extern "C"`, its types
/// C++'s own.
#[test]
fn a_cxx_program_uses_the_header() {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("timehands-cxx-api");
    compile(&CXX, &crate_dir().join("tests/c/api.cpp"), &exe);
    assert_passed(&run(&exe, &[]), "tests/c/api.cpp", |stdout| {
        stdout.starts_with("C++: ")
    });
}

#[test]
fn the_pkg_config_file_has_the_crate_version() {
    assert_eq!(pc_field("Version"), env!("CARGO_PKG_VERSION"));
    assert_eq!(pc_field("Libs"), "-L${libdir} -ltimehands");
}
