//! The dictionary rules: what a device learns, counts, hands over and withholds.

use super::*;

const D1: DictionaryId = DictionaryId { hash: 1, len: 10 };
const D2: DictionaryId = DictionaryId { hash: 2, len: 10 };

/// An NVIDIA device's identity.
fn nvidia() -> crate::store::Identity {
    crate::store::Identity {
        vendor_id: crate::store::identity::NVIDIA,
        ..crate::store::envelope::tests::identity()
    }
}

/// A store under `root` for [`nvidia`].
fn nvidia_store(root: &std::path::Path) -> Store {
    let store = Store::open(
        root,
        "title",
        nvidia(),
        1 << 30,
        std::time::SystemTime::now(),
    );
    store.unwrap().0
}

fn whole(id: DictionaryId) -> Seed {
    Seed::Whole { teaches: Some(id) }
}

fn without(id: DictionaryId) -> Seed {
    Seed::Without {
        dictionary: id,
        data: Vec::new(),
    }
}

#[test]
fn a_dictionary_is_learned_when_served_whole_and_forgotten_when_its_absence_is_not_served() {
    let mut known = Known::default();
    known.after(&whole(D1), false);
    assert!(!known.holds(&D1), "not served: not learned");
    known.after(&Seed::Whole { teaches: None }, true);
    known.after(&whole(D1), true);
    known.after(&whole(D1), true);
    assert!(known.holds(&D1) && !known.holds(&D2));
    assert_eq!(known.0.len(), 1, "learned once");
    known.after(&without(D1), true);
    assert!(known.holds(&D1), "served without it: still held");
    known.after(&whole(D2), true);
    known.after(&without(D1), false);
    assert!(
        !known.holds(&D1),
        "not served without it: the next ones go whole"
    );
    assert!(known.holds(&D2));
}

#[test]
fn a_dictionary_the_driver_refuses_more_often_than_it_serves_is_refused_after_two() {
    let tally = Tally::default();
    assert!(!tally.refuses(&D1), "nothing counted");
    assert!(!tally.doubts(&D1), "nothing counted");
    assert!(tally.count(D1, false), "refused more than served");
    assert!(
        !tally.refuses(&D1),
        "one refusal says nothing of the others"
    );
    assert!(tally.doubts(&D1), "doubted from the first refusal");
    assert!(tally.count(D1, false));
    assert!(tally.refuses(&D1), "two, none served");
    assert!(!tally.refuses(&D2), "another dictionary is its own");

    // Entries carrying it but not needing it, served: the driver takes it after all.
    assert!(tally.count(D1, true), "two refused, one served");
    assert!(!tally.count(D1, true), "as many served as refused");
    assert!(!tally.refuses(&D1) && !tally.doubts(&D1));
    assert!(!tally.doubts(&D2), "another dictionary is its own");
    assert!(tally.count(D1, false), "three refused, two served");
    assert!(tally.refuses(&D1));
}

#[test]
fn data_is_withheld_for_a_doubt_of_its_own_build_or_an_uncounted_seeded_one_only() {
    let tally = Tally::default();
    assert!(!tally.withholds(None, Some(D1), Some(D1)), "no dictionary");
    assert!(
        tally.withholds(Some(D1), Some(D1), None),
        "this build doubted it"
    );
    assert!(!tally.withholds(Some(D2), Some(D1), None), "another one");
    tally.count(D1, false); // another build's entry refused
    assert!(
        tally.withholds(Some(D1), None, Some(D1)),
        "seeded with it, uncounted: others' doubt holds"
    );
    assert!(
        !tally.withholds(Some(D1), None, None),
        "a miss through an empty cache: the dictionary the driver compiles with"
    );
    assert!(
        !tally.withholds(Some(D2), None, Some(D1)),
        "seeded with the doubted one, compiled with another"
    );
    tally.count(D2, false);
    assert!(
        !tally.withholds(Some(D2), None, Some(D1)),
        "compiled with another, doubted too: not the seed's, the one the driver uses now"
    );
    tally.count(D1, true);
    assert!(
        !tally.withholds(Some(D1), None, Some(D1)),
        "served as often as refused: no doubt left"
    );
}

#[test]
fn only_a_seed_handing_over_a_dictionary_goes_uncounted() {
    assert_eq!(whole(D1).went_uncounted(false), Some(D1), "answer unknown");
    assert_eq!(
        without(D1).went_uncounted(false),
        Some(D1),
        "answer unknown"
    );
    assert_eq!(whole(D1).went_uncounted(true), None, "counted");
    assert_eq!(
        Seed::Whole { teaches: None }.went_uncounted(false),
        None,
        "no dictionary handed over: never counted, never withheld for others' doubts"
    );
    assert_eq!(Seed::Refused { dictionary: D1 }.went_uncounted(false), None);
}

#[test]
fn priming_holds_a_dictionary_and_a_device_counts_only_seeds_carrying_one() {
    let mut known = Known::default();
    known.hold(D1);
    known.hold(D1);
    assert!(known.holds(&D1) && known.0.len() == 1);
    let device = DeviceDictionaries::new(true);
    assert_eq!(device.count(&Seed::Whole { teaches: None }, false), None);
    assert_eq!(device.count(&Seed::Refused { dictionary: D1 }, false), None);
    assert!(!device.refuses(&D1), "neither was counted");
    let doubted = Some(BuildAgain { doubted: Some(D1) });
    assert_eq!(device.count(&without(D1), false), doubted);
    assert_eq!(device.count(&whole(D1), false), doubted);
    assert!(device.refuses(&D1));
}

#[test]
fn a_pipeline_compiled_through_data_carrying_a_dictionary_is_built_again_doubted_or_not() {
    let device = DeviceDictionaries::new(true);
    for _ in 0..3 {
        assert_eq!(
            device.count(&whole(D1), true),
            None,
            "served: nothing to build"
        );
    }
    // Served more often than refused, as beside a new disk cache where entries carrying the
    // dictionary without needing it are served: the one refused is built again all the
    // same, and its second build's data is written whatever it carries.
    assert_eq!(
        device.count(&without(D1), false),
        Some(BuildAgain { doubted: None })
    );
    assert!(!device.refuses(&D1));
    assert_eq!(
        device.count(&whole(D2), false),
        Some(BuildAgain { doubted: Some(D2) }),
        "another dictionary, refused more often than served"
    );
    assert_eq!(
        device.count(&whole(D2), true),
        None,
        "served while doubted: the pipeline found is the application's"
    );
}

#[test]
fn an_entry_carrying_a_dictionary_the_driver_refuses_is_not_handed_over() {
    use crate::key::PipelineKey;
    use crate::store::envelope::tests::cache_data;
    use crate::store::nvidia_cache::tests::{dictionary_key, record};
    let root = tempfile::tempdir().unwrap();
    let (store, nvidia) = (nvidia_store(root.path()), nvidia());
    let dictionary = record(dictionary_key(), 0xd1c7, &[5; 3000]);
    let key = PipelineKey {
        spirv: [1; 16],
        state: [1; 16],
    };
    let own = record([1; 16], 1, &[1; 100]);
    let body = [&2u32.to_le_bytes()[..], &own, &dictionary].concat();
    store.write(&key, &cache_data(&nvidia, &body)).unwrap();
    let Ok(Lookup::Found(found)) = store.lookup(&key) else {
        panic!("the entry is found");
    };
    let device = DeviceDictionaries::new(true);
    let Seed::Whole { teaches: Some(id) } = device.seed(&found) else {
        panic!("whole, teaching its dictionary");
    };
    device.after(&whole(id), false);
    assert!(!device.holds(&id), "not served: not learned");
    device.count(&whole(id), false);
    assert!(
        matches!(device.seed(&found), Seed::Whole { .. }),
        "one refusal"
    );
    device.count(&whole(id), false);
    assert!(
        matches!(device.seed(&found), Seed::Refused { dictionary } if dictionary == id),
        "refused twice, none served: not handed over"
    );
    assert!(
        matches!(
            DeviceDictionaries::new(false).seed(&found),
            Seed::Whole { teaches: None }
        ),
        "a device that does not cut the dictionary hands every entry over whole"
    );
}

/// The note through a real store: a device of a run that wrote an entry carrying the
/// dictionary names it; a device of the next run hands that entry over before its first
/// pipeline, once, and then sends the other entries carrying it without it.
#[test]
fn a_device_hands_over_the_noted_dictionary_first_once_and_a_written_one_is_noted() {
    use crate::key::PipelineKey;
    use crate::store::envelope::tests::cache_data;
    use crate::store::nvidia_cache::frame_bytes;
    use crate::store::nvidia_cache::tests::{dictionary_key, record};
    let root = tempfile::tempdir().unwrap();
    let nvidia = nvidia();
    let open = || nvidia_store(root.path());
    let dictionary = record(dictionary_key(), 0xd1c7, &[5; 3000]);
    let entry = |n: u8| {
        let key = PipelineKey {
            spirv: [n; 16],
            state: [n; 16],
        };
        let own = record([n; 16], n.into(), &[n; 100]);
        let body = [&2u32.to_le_bytes()[..], &own, &dictionary].concat();
        (key, cache_data(&nvidia, &body))
    };
    let ((k1, d1), (k2, d2)) = (entry(1), entry(2));

    let run1 = Arc::new(open());
    let first = DeviceDictionaries::new(true);
    first.prime(&run1, |_, _| panic!("nothing is noted yet"));
    let writer = Writer::new(Arc::new(|_, _| {}), None);
    let carried = |d: &[u8]| frame_bytes(d).ok().map(|f| f.dictionary);
    first.note_written(&writer, &run1, k1.file_name(), carried(&d1));
    writer.finish(true); // the note is the writer's to write
    assert_eq!(run1.dictionary_entry(), Some(k1));
    first.note_written(&writer, &run1, k2.file_name(), carried(&d2));
    assert_eq!(run1.dictionary_entry(), Some(k1), "noted once a dictionary");
    run1.write(&k1, &d1).unwrap();
    run1.write(&k2, &d2).unwrap();

    let run2 = open();
    let device = DeviceDictionaries::new(true);
    let mut handed = Vec::new();
    device.prime(&run2, |entry, seed| {
        handed.push((
            entry.name(),
            matches!(seed, Seed::Whole { teaches: Some(_) }),
        ));
        true
    });
    assert_eq!(handed, [(k1.file_name(), true)]);
    device.prime(&run2, |_, _| panic!("once a device"));
    let Ok(Lookup::Found(found)) = run2.lookup(&k2) else {
        panic!("entry 2 is found");
    };
    assert!(matches!(device.seed(&found), Seed::Without { .. }));
    DeviceDictionaries::new(false).prime(&run2, |_, _| panic!("only where it cuts"));

    // The noted entry damaged: another entry carrying the dictionary stands in, and the
    // caller notes it for later runs.
    let path = run2.entry_path(&k1);
    let mut bytes = std::fs::read(&path).unwrap();
    *bytes.last_mut().unwrap() ^= 0x5a;
    std::fs::write(&path, bytes).unwrap();
    let run3 = Arc::new(open());
    let device = DeviceDictionaries::new(true);
    let mut handed = Vec::new();
    let stand_in = device.prime(&run3, |entry, _| {
        handed.push(entry.name());
        true
    });
    assert_eq!(handed, [k2.file_name()]);
    let (name, id) = stand_in.expect("a stand-in");
    assert_eq!(name, k2.file_name());
    let writer = Writer::new(Arc::new(|_, _| {}), None);
    device.note(&writer, &run3, name, id);
    writer.finish(true);
    assert_eq!(run3.dictionary_entry(), Some(k2), "the stand-in is noted");

    // No entry left carrying it: nothing is handed over.
    std::fs::remove_file(run3.entry_path(&k2)).unwrap();
    let none = DeviceDictionaries::new(true).prime(&open(), |_, _| panic!("nothing carries it"));
    assert!(none.is_none());
    assert_eq!(
        run3.dictionary_entry(),
        None,
        "a note naming nothing left is removed"
    );
}

#[test]
fn devices_of_one_identity_in_a_process_share_what_the_driver_holds() {
    let identity = crate::store::envelope::tests::identity();
    let first = DeviceDictionaries::in_process(true, identity);
    first.after(&whole(D1), true);
    let second = DeviceDictionaries::in_process(true, identity);
    assert!(
        second.holds(&D1),
        "the driver's dictionary is the process's"
    );
    let other = DeviceDictionaries::in_process(
        true,
        crate::store::Identity {
            driver_version: identity.driver_version + 1,
            ..identity
        },
    );
    assert!(!other.holds(&D1), "another driver's is its own");
    drop((first, second));
    let after = DeviceDictionaries::in_process(true, identity);
    assert!(
        !after.holds(&D1),
        "let go with the last device: a driver loaded again holds nothing"
    );
}

#[test]
fn a_device_learns_and_forgets_as_one_cache_does() {
    let device = DeviceDictionaries::new(true);
    device.after(&whole(D1), true);
    assert!(device.holds(&D1));
    device.after(&without(D1), false);
    assert!(!device.holds(&D1));
}
