//! Tests of `objects.rs`.

use super::*;

#[test]
fn handles_that_are_aligned_pointers_or_counters_spread_over_a_table() {
    // The low bits of pointer handles are zero and counters differ only there: both must
    // reach every bucket of a small table, or lookups would walk long probe chains.
    let bucket = |h: u64| {
        let mut hasher = HandleHasher::default();
        hasher.write_u64(h);
        hasher.finish() >> 58
    };
    for handles in [
        (0..256u64)
            .map(|i| 0x5555_0000_0000 + i * 64)
            .collect::<Vec<_>>(),
        (1..=256u64).collect(),
    ] {
        let used: std::collections::HashSet<u64> = handles.iter().map(|&h| bucket(h)).collect();
        assert!(used.len() > 48, "{} of 64 buckets used", used.len());
    }
}

fn module(code: &[u32]) -> vk::ShaderModuleCreateInfo<'_> {
    vk::ShaderModuleCreateInfo::default().code(code)
}

#[test]
fn a_module_handle_given_twice_lives_until_destroyed_twice() {
    let objects = Objects::default();
    let code = [0x0723_0203u32, 9];
    // As the module intercept does at each making: the content read (its code held), then
    // the handle remembered. A driver may give one handle to two modules of one content.
    for _ in 0..2 {
        // SAFETY: a create info of a live array.
        let digest = unsafe { module_content(&module(&code), &objects).unwrap() };
        objects.modules.insert(5, Some(digest));
    }
    objects.forget_module(5);
    assert!(
        objects.modules.get(5, "module").is_ok(),
        "made twice, destroyed once: the handle is still a live module"
    );
    assert_eq!(objects.held_codes(), 1);
    objects.forget_module(5);
    assert!(objects.modules.get(5, "module").is_err());
    assert_eq!(objects.held_codes(), 0, "every making's hold given back");
}

#[test]
fn a_modules_code_is_held_while_a_module_with_it_lives_and_no_longer() {
    let objects = Objects::default();
    let (a, b) = ([0x0723_0203u32, 1, 2], [0x0723_0203u32, 1, 3]);
    // SAFETY: create infos of live arrays.
    let (da, db) = unsafe {
        (
            module_content(&module(&a), &objects).unwrap(),
            module_content(&module(&b), &objects).unwrap(),
        )
    };
    // Two modules of code `a` (handles 1 and 2), one of `b` (3).
    unsafe { module_content(&module(&a), &objects).unwrap() };
    for (handle, digest) in [(1, da), (2, da), (3, db)] {
        objects.modules.insert(handle, Some(digest));
    }
    assert_eq!(objects.held_codes(), 2);
    objects.forget_module(1);
    assert_eq!(
        objects.content(&da).as_deref(),
        Some(&Content::Module(a.to_vec())),
        "module 2 still holds it"
    );
    objects.forget_module(2);
    objects.forget_module(3);
    objects.forget_module(3); // destroyed twice, or never known: nothing to give back
    assert_eq!(objects.held_codes(), 0);
    assert!(objects.content(&da).is_none() && objects.content(&db).is_none());
}

#[test]
fn inline_code_is_readable_only_inside_its_pipeline_call() {
    let objects = Objects::default();
    let code = [0x0723_0203u32, 9];
    // Outside a pipeline call nothing is noted.
    // SAFETY: a create info of a live array.
    let digest = unsafe { inline_module_content(&module(&code)).unwrap() };
    assert!(objects.content(&digest).is_none());
    {
        let _call = InlineCodeScope::open();
        unsafe { inline_module_content(&module(&code)).unwrap() };
        {
            // A call inside it (a derivative's base) leaves the outer call's code alone.
            let _inner = InlineCodeScope::open();
        }
        assert_eq!(
            objects.content(&digest).as_deref(),
            Some(&Content::Module(code.to_vec()))
        );
    }
    assert!(objects.content(&digest).is_none());
    assert_eq!(objects.held_codes(), 0);
}

#[test]
fn a_tracked_handle_is_found_until_it_is_removed() {
    let tracked = Tracked::<u32>::new();
    for h in 0..1000u64 {
        tracked.insert(h << 4, Some(h as u32));
    }
    tracked.insert(7, None);
    assert_eq!(tracked.get(999 << 4, "x"), Ok(999));
    assert_eq!(tracked.get(7, "x"), Err(Unkeyable::UnknownObject("x")));
    tracked.remove(999 << 4);
    assert_eq!(
        tracked.get(999 << 4, "x"),
        Err(Unkeyable::UnknownObject("x"))
    );
}
