# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_pipekeep_global_optspecs
    string join \n h/help V/version
end

function __fish_pipekeep_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_pipekeep_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_pipekeep_using_subcommand
    set -l cmd (__fish_pipekeep_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c pipekeep -n "__fish_pipekeep_needs_command" -s h -l help -d 'Print help'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -s V -l version -d 'Print version'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "replay" -d 'Replay every pipeline of Fossilize databases (.foz) through the Vulkan loader'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "rebuild" -d 'Rebuild titles\' stores from their records, for the driver present'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "list" -d 'Every title, each identity directory under it, its entries, bytes and stamps'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "verify" -d 'Check every entry as the layer would (envelope, length, hash, cache header), those left waiting too'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "prune" -d 'Bring a title\'s store within N bytes, in the layer\'s order: pieces no kept entry names first, then the oldest stamps, an entry\'s own pieces right after it; the title\'s record takes at most its share (a quarter), and is compacted to it in the same order. With --library, then the whole library within its bound, as the layer\'s opening keeps it: other drivers\' directories first, then the least recently used titles, each one\'s entries before its record'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "clear" -d 'Remove every entry (and marker and partial write) of a title, or of every title'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "stats" -d 'The history of recent runs, from each title\'s runs.jsonl'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "where" -d 'The library root, the settings and the manifests in force, and whether the layer is on'
complete -c pipekeep -n "__fish_pipekeep_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l threads -d 'Threads creating pipelines' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l app-cache -d 'The application\'s own cache: none, memory (in-memory caches shared by every thread, a fresh one each 1,024 pipelines, as Valve\'s replayer keeps them), file=PATH (one monolithic cache loaded whole at start and saved at exit), each (a fresh cache a pipeline, its data read after: what keeping per pipeline costs the driver alone), or each=DIR (the same, each pipeline\'s data kept in DIR, and a pipeline whose data is there built through a cache made of it: the driver\'s own found path, a cache a pipeline)' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l device -d 'Which physical device, in the loader\'s order' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l title -d 'pApplicationName (and so pipekeep\'s title) instead of the recorded one' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l linger-ms -d 'Keep the device this many milliseconds after the last pipeline, as an application that goes on after its loading would (pipekeep\'s background work goes on meanwhile)' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l order -d 'The order pipelines are taken in: hash (as Valve\'s replayer: graphics, compute, then ray tracing, each sorted by hash) or file (as the application made them)' -r -f -a "hash\t''
file\t''"
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l progress -d 'Show progress on stderr: a bar on a terminal, else a line every 100 pipelines'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l json -d 'Print the summary as JSON (with every pipeline\'s creation time with --times)'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l times -d 'With --json: include each pipeline\'s creation time'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -l every-extension -d 'Make the device as translation layers, emulators and replay tools do: every extension offered, every feature structure the device reports chained with what it reports'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand replay" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand rebuild" -l dir -d 'The library root (default: PIPEKEEP_DIR, else $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep)' -r -F
complete -c pipekeep -n "__fish_pipekeep_using_subcommand rebuild" -l title -d 'Only this title' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand rebuild" -l threads -d 'Threads creating pipelines (default: half the cores)' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand rebuild" -l json -d 'Machine-readable output'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand rebuild" -l progress -d 'Show progress on stderr: a bar on a terminal, else a line every 100 pipelines'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand rebuild" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand list" -l dir -d 'The library root (default: PIPEKEEP_DIR, else $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep)' -r -F
complete -c pipekeep -n "__fish_pipekeep_using_subcommand list" -l title -d 'Only this title' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand list" -l json -d 'Machine-readable output'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand list" -l devices -d 'Also ask Vulkan which devices this machine has, and say which identities are theirs (creates a Vulkan instance; a listing without it touches nothing but the files)'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand list" -s h -l help -d 'Print help'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand verify" -l dir -d 'The library root (default: PIPEKEEP_DIR, else $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep)' -r -F
complete -c pipekeep -n "__fish_pipekeep_using_subcommand verify" -l title -d 'Only this title' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand verify" -l json -d 'Machine-readable output'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand verify" -l fix -d 'Drop the bad entries; write each damaged file of entries left waiting again without its damage (removed where nothing in it is sound, or no opening would take it)'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand verify" -s h -l help -d 'Print help'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand prune" -l dir -d 'The library root (default: PIPEKEEP_DIR, else $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep)' -r -F
complete -c pipekeep -n "__fish_pipekeep_using_subcommand prune" -l title -d 'Only this title' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand prune" -l max-bytes -d 'Each title\'s bound, in bytes' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand prune" -l library-max-bytes -d 'The library\'s bound, in bytes (default: PIPEKEEP_LIBRARY_MAX_BYTES, else 4 GiB)' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand prune" -l json -d 'Machine-readable output'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand prune" -l library -d 'Bring the whole library within its bound (every title: no --title)'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand prune" -l dry-run -d 'Say what would be dropped, drop nothing'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand prune" -s h -l help -d 'Print help'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand clear" -l dir -d 'The library root (default: PIPEKEEP_DIR, else $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep)' -r -F
complete -c pipekeep -n "__fish_pipekeep_using_subcommand clear" -l title -d 'Only this title' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand clear" -l json -d 'Machine-readable output'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand clear" -s h -l help -d 'Print help'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand stats" -l dir -d 'The library root (default: PIPEKEEP_DIR, else $XDG_CACHE_HOME/pipekeep, else ~/.cache/pipekeep)' -r -F
complete -c pipekeep -n "__fish_pipekeep_using_subcommand stats" -l title -d 'Only this title' -r
complete -c pipekeep -n "__fish_pipekeep_using_subcommand stats" -l plot -d 'Write an SVG plot of pipeline-creation time per run' -r -F
complete -c pipekeep -n "__fish_pipekeep_using_subcommand stats" -l json -d 'Machine-readable output'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand stats" -s h -l help -d 'Print help'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand where" -l json -d 'Machine-readable output'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand where" -s h -l help -d 'Print help'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "replay" -d 'Replay every pipeline of Fossilize databases (.foz) through the Vulkan loader'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "rebuild" -d 'Rebuild titles\' stores from their records, for the driver present'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "list" -d 'Every title, each identity directory under it, its entries, bytes and stamps'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "verify" -d 'Check every entry as the layer would (envelope, length, hash, cache header), those left waiting too'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "prune" -d 'Bring a title\'s store within N bytes, in the layer\'s order: pieces no kept entry names first, then the oldest stamps, an entry\'s own pieces right after it; the title\'s record takes at most its share (a quarter), and is compacted to it in the same order. With --library, then the whole library within its bound, as the layer\'s opening keeps it: other drivers\' directories first, then the least recently used titles, each one\'s entries before its record'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "clear" -d 'Remove every entry (and marker and partial write) of a title, or of every title'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "stats" -d 'The history of recent runs, from each title\'s runs.jsonl'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "where" -d 'The library root, the settings and the manifests in force, and whether the layer is on'
complete -c pipekeep -n "__fish_pipekeep_using_subcommand help; and not __fish_seen_subcommand_from replay rebuild list verify prune clear stats where help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
