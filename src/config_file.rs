//! `serve --config FILE`: the settings as a YAML file, each key a flag of `serve` without
//! its dashes. The file only fills what the command line and the environment leave
//! unset — a flag wins over its `SWITCHBOARD_<FLAG>` variable, which wins over the file —
//! so one file serves every node while one node's flag still changes that node.
//!
//! The file becomes command-line arguments before clap reads them: every setting is then
//! checked, converted and documented by the one definition of the flag, and a file can
//! say nothing a flag cannot.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{ArgAction, CommandFactory};

use crate::config::Cli;
use crate::yaml::{self, Node};

/// What was wrong with the settings file: every problem, each with its line.
#[derive(Debug, thiserror::Error)]
#[error("{}", .problems.join("\n"))]
pub struct ConfigFileError {
    /// One line per problem: `FILE:LINE: what`.
    pub problems: Vec<String>,
}

/// The command line with the settings file's keys added, when `serve` is given
/// `--config FILE` (or `SWITCHBOARD_CONFIG`); the command line as it is otherwise.
/// `env` reads an environment variable (a parameter so a test can give its own).
pub fn expand(
    args: Vec<OsString>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Vec<OsString>, ConfigFileError> {
    if args.get(1).is_none_or(|a| a != "serve") {
        return Ok(args);
    }
    let given: Vec<String> = args[2..]
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let Some(path) = config_path(&given).or_else(|| env("SWITCHBOARD_CONFIG").map(PathBuf::from))
    else {
        return Ok(args);
    };
    let shown = path.display().to_string();
    let fail = |line: Option<usize>, what: String| ConfigFileError {
        problems: vec![match line {
            Some(line) => format!("{shown}:{line}: {what}"),
            None => format!("{shown}: {what}"),
        }],
    };
    let text =
        std::fs::read_to_string(&path).map_err(|e| fail(None, format!("cannot read it: {e}")))?;
    let root = yaml::parse(&text).map_err(|e| fail(Some(e.line), e.message))?;
    let Node::Mapping { entries, .. } = root else {
        return Err(fail(
            Some(root.line()),
            "the settings must be a mapping of `flag: value`".into(),
        ));
    };
    let mut added = Vec::new();
    let mut problems = Vec::new();
    for (key, value) in &entries {
        match setting(key, value, &given, env) {
            Ok(args) => added.extend(args),
            Err(what) => problems.push(format!("{shown}:{}: {what}", value.line())),
        }
    }
    if !problems.is_empty() {
        return Err(ConfigFileError { problems });
    }
    let mut out = args[..2].to_vec();
    out.extend(added.into_iter().map(OsString::from));
    out.extend(args[2..].iter().cloned());
    Ok(out)
}

/// `--config FILE` or `--config=FILE` among `serve`'s arguments.
fn config_path(given: &[String]) -> Option<PathBuf> {
    given.iter().enumerate().find_map(|(i, arg)| {
        if arg == "--config" {
            given.get(i + 1).map(PathBuf::from)
        } else {
            arg.strip_prefix("--config=").map(PathBuf::from)
        }
    })
}

/// The arguments one `key: value` of the file stands for: none when the command line or
/// the environment sets it already.
fn setting(
    key: &str,
    value: &Node,
    given: &[String],
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Vec<String>, String> {
    let name = key.replace('_', "-");
    if name == "config" {
        return Err("`config` names the file itself; a settings file cannot name another".into());
    }
    let serve = Cli::command();
    let serve = serve.find_subcommand("serve").cloned().unwrap_or_default();
    let Some(arg) = serve
        .get_arguments()
        .find(|a| a.get_long() == Some(name.as_str()) && name != "help")
    else {
        let flags: Vec<&str> = serve.get_arguments().filter_map(|a| a.get_long()).collect();
        return Err(match closest(&name, &flags) {
            Some(near) => format!("`{key}` is not a setting of `serve` (did you mean `{near}`?)"),
            None => format!("`{key}` is not a setting of `serve`"),
        });
    };
    let flag = format!("--{name}");
    let on_command_line = given
        .iter()
        .any(|a| *a == flag || a.starts_with(&format!("{flag}=")));
    let in_environment = arg
        .get_env()
        .is_some_and(|var| env(&var.to_string_lossy()).is_some());
    if on_command_line || in_environment {
        return Ok(Vec::new());
    }
    let scalar = |node: &Node| match node {
        Node::Scalar { text, .. } if !node.is_null() => Ok(text.clone()),
        _ => Err(format!("`{key}` takes a value, not {}", node.kind())),
    };
    match arg.get_action() {
        ArgAction::SetTrue => match value {
            Node::Scalar {
                text, plain: true, ..
            } if text == "true" => Ok(vec![flag]),
            Node::Scalar {
                text, plain: true, ..
            } if text == "false" => Ok(Vec::new()),
            _ => Err(format!("`{key}` is `true` or `false`")),
        },
        ArgAction::Append => match value {
            Node::Sequence { items, .. } => items
                .iter()
                .map(|item| scalar(item).map(|v| format!("{flag}={v}")))
                .collect(),
            other => Ok(vec![format!("{flag}={}", scalar(other)?)]),
        },
        _ => Ok(vec![format!("{flag}={}", scalar(value)?)]),
    }
}

/// The flag nearest to a misspelt key, if one is near enough to be what was meant.
fn closest<'a>(key: &str, flags: &[&'a str]) -> Option<&'a str> {
    flags
        .iter()
        .map(|flag| (distance(key, flag), *flag))
        .filter(|(d, _)| *d <= 2 + key.len() / 6)
        .min()
        .map(|(_, flag)| flag)
}

/// Levenshtein distance, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(current + 1);
            previous = current;
        }
    }
    row[b.len()]
}
