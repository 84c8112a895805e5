//! The library pass's choice of what goes, on titles described by hand, and one pass over files.

use super::*;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn dir_name(driver: u32, uuid: u8) -> DirName {
    DirName {
        vendor_id: 0x1002,
        device_id: 0x73bf,
        driver_version: driver,
        cache_uuid: [uuid; 16],
    }
}

fn dir(title: &str, driver: u32, uuid: u8, newest: u64, bytes: u64) -> DirUsage {
    let name = dir_name(driver, uuid);
    DirUsage {
        path: PathBuf::from(format!("{title}/{driver}-{uuid}")),
        name,
        abi: Some(8),
        newest: Some(at(newest)),
        bytes,
    }
}

fn title(name: &str, last_use: u64, dirs: Vec<DirUsage>, record_bytes: u64) -> TitleUsage {
    TitleUsage {
        title: name.into(),
        last_use: at(last_use),
        dirs,
        set_aside: Vec::new(),
        record_bytes,
    }
}

/// Three titles of 100 bytes of entries and 10 of record each, used at 1, 2 and 3.
fn three() -> Vec<TitleUsage> {
    vec![
        title("c", 3, vec![dir("c", 1, 1, 3, 100)], 10),
        title("a", 1, vec![dir("a", 1, 1, 1, 100)], 10),
        title("b", 2, vec![dir("b", 1, 1, 2, 100)], 10),
    ]
}

#[test]
fn within_the_bound_nothing_goes() {
    assert!(plan(&three(), 330, None, None).is_empty());
    assert!(plan(&three(), 1 << 40, None, None).is_empty());
}

#[test]
fn the_least_recently_used_title_gives_up_its_entries_first() {
    let steps = plan(&three(), 300, None, None);
    assert_eq!(
        steps,
        vec![Step::Shrink {
            title: "a".into(),
            bytes: 30
        }]
    );
}

#[test]
fn a_title_goes_whole_its_record_last_before_the_next_is_touched() {
    // 330 bytes in a bound of 20: a's entries then its record, b's, then c's entries.
    let steps = plan(&three(), 20, None, None);
    let shrink = |t: &str, bytes| Step::Shrink {
        title: t.into(),
        bytes,
    };
    let record = |t: &str| Step::DropRecord {
        title: t.into(),
        bytes: 10,
    };
    assert_eq!(
        steps,
        vec![
            shrink("a", 100),
            record("a"),
            shrink("b", 100),
            record("b"),
            shrink("c", 90)
        ]
    );
    // In a bound of 225 a goes whole; in one of 235, a keeps its record and 5 bytes of entries.
    let steps = plan(&three(), 225, None, None);
    assert_eq!(steps, vec![shrink("a", 100), record("a")]);
    let steps = plan(&three(), 235, None, None);
    assert_eq!(steps, vec![shrink("a", 95)]);
}

#[test]
fn the_record_of_the_title_in_use_is_kept() {
    let steps = plan(&three(), 0, None, Some("a"));
    assert!(!steps.contains(&Step::DropRecord {
        title: "a".into(),
        bytes: 10
    }));
    assert!(steps.contains(&Step::DropRecord {
        title: "c".into(),
        bytes: 10
    }));
}

#[test]
fn an_older_driver_of_a_device_goes_before_any_title_shrinks() {
    // b, used last, still holds an old driver's directory; a newer driver of the same device was
    // used since (by c): it goes first, whole, though b is the most recently used title.
    let mut titles = three();
    titles[2].last_use = at(9);
    titles[2].dirs.push(dir("b", 0, 0, 1, 50));
    let steps = plan(&titles, 330, None, None);
    let old = PathBuf::from("b/0-0");
    assert_eq!(
        steps,
        vec![Step::DropDir {
            title: "b".into(),
            path: old,
            bytes: 50
        }]
    );
}

#[test]
fn superseded_are_the_older_drivers_of_a_device_never_another_device_or_abi() {
    let mut titles = three();
    let mut other_abi = dir("a", 0, 7, 1, 5);
    other_abi.abi = Some(4);
    let mut other_device = dir("a", 0, 8, 1, 5);
    other_device.name.device_id = 0x1234;
    titles[1]
        .dirs
        .extend([dir("a", 0, 6, 1, 5), other_abi, other_device]);
    let gone = superseded(&titles, None);
    assert_eq!(gone, HashSet::from([PathBuf::from("a/0-6")]));
    // The device opening now supersedes every other driver of it, the newest stamps too.
    let now = Identity {
        vendor_id: 0x1002,
        device_id: 0x73bf,
        driver_version: 2,
        cache_uuid: [2; 16],
        abi: 8,
    };
    let gone = superseded(&titles, Some(&now));
    for kept in ["a/0-7", "a/0-8"] {
        assert!(!gone.contains(Path::new(kept)), "{kept}");
    }
    for dropped in ["a/0-6", "a/1-1", "b/1-1", "c/1-1"] {
        assert!(gone.contains(Path::new(dropped)), "{dropped}");
    }
}

#[test]
fn a_driver_used_lately_by_any_title_is_not_superseded_nor_is_an_empty_directory() {
    // "old" holds driver 7, used long ago there but a minute ago by "host"; "flatpak" used driver
    // 6 an hour ago. Driver 7 is in use: neither of its directories goes; driver 6 was last used
    // before driver 7 was, so its directory goes.
    let mut empty = dir("fresh", 8, 8, 0, 0);
    empty.newest = None;
    let titles = vec![
        title("old", 1, vec![dir("old", 7, 7, 1, 100)], 10),
        title("flatpak", 50, vec![dir("flatpak", 6, 6, 50, 100)], 10),
        title("host", 60, vec![dir("host", 7, 7, 60, 100)], 10),
        title("fresh", 0, vec![empty], 0),
    ];
    let gone = superseded(&titles, None);
    assert_eq!(gone, HashSet::from([PathBuf::from("flatpak/6-6")]));
}

#[test]
fn directories_set_aside_go_first() {
    let mut titles = three();
    titles[0]
        .set_aside
        .push((PathBuf::from("c/old.dropped"), 40));
    let steps = plan(&titles, 300, None, None);
    assert_eq!(
        steps[0],
        Step::DropDir {
            title: "c".into(),
            path: PathBuf::from("c/old.dropped"),
            bytes: 40
        }
    );
    assert_eq!(
        steps[1],
        Step::Shrink {
            title: "a".into(),
            bytes: 30
        }
    );
}

/// A title of `n` entries of 1,000 bytes, stamped `used` (less a second an entry), and a record.
fn write_title(root: &Path, name: &str, n: u64, used: u64) {
    let d = root
        .join(name)
        .join("host-pipelines")
        .join("1002-73bf-06400007-a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
    fs::create_dir_all(&d).unwrap();
    for i in 0..n {
        let path = d.join(format!("{:032x}-{:032x}.entry", i + 1, i + 1));
        fs::write(&path, vec![0u8; 1000]).unwrap();
        let f = File::options().write(true).open(&path).unwrap();
        f.set_modified(at(used) - Duration::from_secs(i)).unwrap();
    }
    fs::write(root.join(name).join(RECORD_FILE), vec![1u8; 500]).unwrap();
}

fn entries_of(root: &Path, name: &str) -> u64 {
    bound::entries_of_title(&root.join(name).join("host-pipelines"))
        .unwrap()
        .len() as u64
}

#[test]
fn a_pass_over_files_shrinks_the_least_recently_used_title_its_record_last() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for (name, used) in [("one", 100), ("two", 200), ("three", 300)] {
        write_title(root, name, 10, used);
    }
    // 31,500 bytes; a bound of 27,000 costs "one" five entries and nothing else.
    let r = keep_within(root, 27_000, None, Wait::Yes, &|_| false).unwrap();
    assert_eq!((r.bytes_before, r.bytes), (31_500, 26_500));
    assert_eq!(entries_of(root, "one"), 5);
    assert!(root.join("one").join(RECORD_FILE).exists());
    assert_eq!(
        (entries_of(root, "two"), entries_of(root, "three")),
        (10, 10)
    );
    // Another 5,001 bytes: "one"'s last entries, then its record; the others untouched.
    keep_within(root, 21_499, None, Wait::Yes, &|_| false).unwrap();
    assert_eq!(entries_of(root, "one"), 0);
    assert!(!root.join("one").join(RECORD_FILE).exists());
    assert_eq!(
        (entries_of(root, "two"), entries_of(root, "three")),
        (10, 10)
    );
    assert!(root.join("two").join(RECORD_FILE).exists());
}

#[test]
fn the_title_opening_now_is_the_last_to_shrink() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write_title(root, "old", 4, 100);
    write_title(root, "new", 4, 200);
    let id = Identity {
        vendor_id: 0x1002,
        device_id: 0x73bf,
        driver_version: 0x06400007,
        cache_uuid: [
            0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad,
            0xae, 0xaf,
        ],
        abi: 8,
    };
    keep_within(root, 7_000, Some(("old", &id)), Wait::Yes, &|_| false).unwrap();
    assert_eq!((entries_of(root, "old"), entries_of(root, "new")), (4, 2));
}

#[test]
fn a_library_not_made_yet_holds_nothing_and_is_within_any_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("not-made");
    let r = keep_within(&root, 0, None, Wait::No, &|_| false).unwrap();
    assert_eq!((r.titles, r.bytes, r.steps.len()), (0, 0, 0));
    assert!(!root.exists(), "nothing is created");
}
