//! The `pipekeep` command: replay Fossilize databases through the loader, rebuild a title's store
//! from its record, and see, check and tidy the pipeline store (list, verify, prune, clear,
//! stats, where).

#[cfg(test)]
mod docs_tests;
mod progress;
mod rebuild;
mod replay;
mod store;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "pipekeep",
    version,
    about = "Replay Vulkan pipelines into pipekeep's store, and see, check and tidy the store"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Replay(replay::Args),
    Rebuild(rebuild::Args),
    List(store::ListArgs),
    Verify(store::VerifyArgs),
    Prune(store::PruneArgs),
    Clear(store::ClearArgs),
    Stats(store::StatsArgs),
    Where(store::WhereArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(a) => replay::run(a),
        Command::Rebuild(a) => rebuild::run(a),
        Command::List(a) => store::list(a),
        Command::Verify(a) => store::verify(a),
        Command::Prune(a) => store::prune(a),
        Command::Clear(a) => store::clear(a),
        Command::Stats(a) => store::stats(a),
        Command::Where(a) => store::where_(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pipekeep: {e}");
            ExitCode::from(2)
        }
    }
}
