//! The Debian package (`scripts/package`): what it holds, its unit checked by `systemd-analyze
//! verify`, and, in CI as root, installed with `dpkg -i`, its configuration checked by the
//! installed binary, and purged without a trace.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `program args`, failing the test with its output when it fails; its standard output.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Builds the package into `out`; its path.
fn build_package(out: &Path) -> PathBuf {
    // The binary this test run built: no cargo inside a test (the build folder is locked).
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/package"))
        .arg(out)
        .env("WATCHPOST_BINARY", env!("CARGO_BIN_EXE_watchpost"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/package: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn the_package_installs_a_hardened_unit_a_conffile_and_a_service_user() {
    let dir = tempfile::tempdir().unwrap();
    let deb = build_package(dir.path());
    let size = std::fs::metadata(&deb).unwrap().len();
    eprintln!("package: {} ({} MB)", deb.display(), size >> 20);
    let deb = deb.to_str().unwrap();

    let info = run("dpkg-deb", &["--info", deb]);
    for field in ["Package: watchpost", "Depends: ", "Installed-Size: "] {
        assert!(info.contains(field), "{field}: {info}");
    }
    let contents = run("dpkg-deb", &["--contents", deb]);
    for path in [
        "./usr/bin/watchpost",
        "./lib/systemd/system/watchpost.service",
        "./etc/watchpost/watchpost.toml",
        "./usr/share/doc/watchpost/copyright",
        "./usr/share/doc/watchpost/ATTACK-LICENSE.txt",
    ] {
        assert!(contents.contains(path), "{path} missing: {contents}");
    }
    let control = dir.path().join("control");
    run("dpkg-deb", &["--control", deb, control.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(control.join("conffiles")).unwrap(),
        "/etc/watchpost/watchpost.toml\n"
    );

    // The unit as packaged, checked against the binary as packaged.
    let tree = dir.path().join("tree");
    run("dpkg-deb", &["--extract", deb, tree.to_str().unwrap()]);
    let unit = std::fs::read_to_string(tree.join("lib/systemd/system/watchpost.service")).unwrap();
    for setting in [
        "User=watchpost",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "PrivateTmp=yes",
        "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
        "LimitNOFILE=",
        "TimeoutStopSec=",
        "KillSignal=SIGTERM",
    ] {
        assert!(unit.contains(setting), "{setting}: {unit}");
    }
    // Reloads only when asked (`systemctl reload`: SIGHUP, checked and applied by the service
    // itself, docs/reload.md); nothing watches the file to reload on its own.
    assert!(
        unit.contains("ExecReload=/bin/kill -HUP $MAINPID"),
        "{unit}"
    );
    assert!(!unit.contains("PathChanged") && !unit.contains("PathModified"));
    let binary = tree.join("usr/bin/watchpost");
    let checked = dir.path().join("watchpost.service");
    std::fs::write(
        &checked,
        unit.replace("/usr/bin/watchpost", binary.to_str().unwrap()),
    )
    .unwrap();
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let out = Command::new("systemd-analyze")
            .args(["verify", checked.to_str().unwrap()])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        // Without systemd as PID 1 (a container), verify cannot resolve the user or the
        // targets; what it says about the unit's own settings must be nothing.
        let about_unit: Vec<&str> = said
            .lines()
            .filter(|l| l.contains("watchpost.service") && !l.contains("Failed to"))
            .collect();
        assert!(about_unit.is_empty(), "systemd-analyze verify: {said}");
    }
    // The packaged configuration is valid as it stands.
    run(
        binary.to_str().unwrap(),
        &[
            "config",
            "check",
            tree.join("etc/watchpost/watchpost.toml").to_str().unwrap(),
        ],
    );

    // CI (root, a throw-away machine): installed, checked by the installed binary, purged.
    let root = unsafe { libc::geteuid() } == 0;
    if std::env::var("CI").is_err() || !root {
        eprintln!("dpkg -i skipped: it runs in CI as root");
        return;
    }
    run("dpkg", &["-i", deb]);
    run(
        "/usr/bin/watchpost",
        &["config", "check", "/etc/watchpost/watchpost.toml"],
    );
    assert!(run("getent", &["passwd", "watchpost"]).contains("/var/lib/watchpost"));
    let data = std::fs::metadata("/var/lib/watchpost").unwrap();
    assert!(data.is_dir());
    run("dpkg", &["--purge", "watchpost"]);
    for gone in [
        "/usr/bin/watchpost",
        "/etc/watchpost/watchpost.toml",
        "/lib/systemd/system/watchpost.service",
        "/var/lib/watchpost",
    ] {
        assert!(!Path::new(gone).exists(), "{gone} is left after purge");
    }
    assert!(
        Command::new("getent")
            .args(["passwd", "watchpost"])
            .output()
            .is_ok_and(|o| !o.status.success()),
        "the user is left after purge"
    );
}
