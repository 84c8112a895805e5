//! The executable's name as Mesa's driconf matches an application by it: its `.drirc` options for
//! an executable change what the driver compiles, and the driver's global key with it, so the
//! record keeps the name and `pipekeep rebuild` compiles under it
//! (`MESA_DRICONF_EXECUTABLE_OVERRIDE`). Read as Mesa reads it: the override where set, else
//! `MESA_PROCESS_NAME`, else glibc's `program_invocation_name` (which Wine rewrites to the Windows
//! program's, unlike the argv Rust keeps), cut as Mesa's `util_get_process_name` cuts it.

use std::ffi::{c_char, CStr};

extern "C" {
    /// glibc's name the program was invoked by (`errno.h`, `_GNU_SOURCE`).
    static program_invocation_name: *const c_char;
}

/// The name, or `None` where none can be told.
pub fn driconf_executable() -> Option<String> {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    set("MESA_DRICONF_EXECUTABLE_OVERRIDE")
        .or_else(|| set("MESA_PROCESS_NAME"))
        .or_else(|| {
            // SAFETY: glibc sets it before main and never frees it; NULL is checked.
            let invoked = unsafe { program_invocation_name.as_ref().map(|p| CStr::from_ptr(p)) }?;
            let invoked = invoked.to_string_lossy();
            let exe = std::fs::read_link("/proc/self/exe").ok();
            program_name(&invoked, exe.as_deref().and_then(|p| p.to_str())).map(str::to_owned)
        })
}

/// Mesa's cut (`src/util/u_process.c`): with a `/`, the real executable's file name where its path
/// begins the invoked name (a program passing arguments in argv[0]), else what follows the last
/// `/`; without one, what follows the last `\` (a Windows path under Wine); else the whole name.
fn program_name<'a>(invoked: &'a str, exe: Option<&'a str>) -> Option<&'a str> {
    let name = match invoked.rsplit_once('/') {
        Some((_, after)) => match exe.filter(|e| invoked.starts_with(e)) {
            Some(e) => e.rsplit_once('/').map_or(e, |(_, n)| n),
            None => after,
        },
        None => invoked.rsplit_once('\\').map_or(invoked, |(_, n)| n),
    };
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_is_named_as_mesa_names_it() {
        let exe = Some("/usr/bin/fossilize-replay");
        assert_eq!(
            program_name("/usr/bin/fossilize-replay", exe),
            Some("fossilize-replay")
        );
        assert_eq!(
            program_name("/usr/bin/fossilize-replay --arg", exe),
            Some("fossilize-replay"),
            "arguments in argv[0] after the real path"
        );
        assert_eq!(program_name("/opt/other", exe), Some("other"));
        assert_eq!(program_name("game.exe", None), Some("game.exe"));
        assert_eq!(program_name("C:\\Games\\game.exe", None), Some("game.exe"));
        assert_eq!(program_name("/opt/", None), None);
        assert!(driconf_executable().is_some(), "this test's own name");
    }
}
