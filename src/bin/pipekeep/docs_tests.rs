//! The man pages and shell completions the Debian package installs, generated from the command's
//! own clap definitions: `packaging/man/` (`pipekeep.1` and a page a subcommand, by clap_mangen)
//! and `packaging/completions/` (bash, zsh and fish, by clap_complete). They are committed, so
//! that `cargo deb` from a clean clone has them; this test fails when they are not what the
//! definitions make now, and `PIPEKEEP_REGENERATE_DOCS=1 cargo test --bin pipekeep docs` writes
//! them again. Neither generator is a dependency of the command: both are dev-dependencies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

/// The day the man pages last changed, in `.TH`'s date field.
const PAGES_DATE: &str = "2026-12-06";

/// Every generated file, by its path under the repository's root.
fn generated() -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    // As clap_mangen::generate_to makes them, each page naming the command's version (its
    // source) and the day the pages last changed (`.TH`'s date, which a page without one
    // takes the source for).
    fn pages(cmd: clap::Command, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            pages(sub.clone(), out);
        }
        let man = clap_mangen::Man::new(cmd)
            .date(PAGES_DATE)
            .source(concat!("pipekeep ", env!("CARGO_PKG_VERSION")));
        let mut text = Vec::new();
        man.render(&mut text).unwrap();
        out.insert(Path::new("packaging/man").join(man.get_filename()), text);
    }
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    pages(cmd, &mut out);
    // The names Debian's bash-completion, zsh and fish look under, as installed.
    for (shell, name) in [
        (Shell::Bash, "pipekeep.bash"),
        (Shell::Zsh, "_pipekeep"),
        (Shell::Fish, "pipekeep.fish"),
    ] {
        let mut text = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "pipekeep", &mut text);
        out.insert(Path::new("packaging/completions").join(name), text);
    }
    out
}

/// The files committed under the directories the generated files go to.
fn committed(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for dir in ["packaging/man", "packaging/completions"] {
        let Ok(listing) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for f in listing {
            let f = f.unwrap();
            out.insert(
                Path::new(dir).join(f.file_name()),
                std::fs::read(f.path()).unwrap(),
            );
        }
    }
    out
}

#[test]
fn docs_the_man_pages_and_completions_are_what_the_clap_definitions_make() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let generated = generated();
    assert!(generated.contains_key(Path::new("packaging/man/pipekeep.1")));
    assert!(generated.contains_key(Path::new("packaging/man/pipekeep-replay.1")));
    let before = committed(root);
    if std::env::var_os("PIPEKEEP_REGENERATE_DOCS").is_some() && before != generated {
        for path in before.keys().filter(|p| !generated.contains_key(*p)) {
            std::fs::remove_file(root.join(path)).unwrap();
        }
        for (path, text) in &generated {
            std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            std::fs::write(root.join(path), text).unwrap();
        }
        panic!("packaging/man and packaging/completions written again: run the test once more");
    }
    let names = |m: &BTreeMap<PathBuf, Vec<u8>>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&before),
        names(&generated),
        "not the files the definitions make: PIPEKEEP_REGENERATE_DOCS=1 cargo test --bin pipekeep docs"
    );
    for (path, text) in &generated {
        assert!(
            before[path] == *text,
            "{} is not what the definitions make: PIPEKEEP_REGENERATE_DOCS=1 cargo test --bin \
             pipekeep docs",
            path.display()
        );
    }
}

#[test]
fn docs_the_main_page_names_the_command_and_every_subcommand() {
    let page =
        String::from_utf8(generated()[Path::new("packaging/man/pipekeep.1")].clone()).unwrap();
    assert!(page.contains(".SH NAME\npipekeep \\-"), "{page}");
    for sub in [
        "replay", "rebuild", "list", "verify", "prune", "clear", "stats", "where",
    ] {
        assert!(
            page.contains(&format!("pipekeep\\-{sub}(1)")),
            "{sub} is not in the page:\n{page}"
        );
    }
}
