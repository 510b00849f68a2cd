//! `file_read`, `file_write` and `file_list`: files under the workspace, and nothing else.
//!
//! All filesystem work runs in `spawn_blocking`: it is synchronous std I/O, and a slow disk or a big
//! directory must not stall the runtime's worker threads.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use portico_pipeline::LocalTool;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::text::decode;
use crate::workspace::{PathError, Workspace};

/// The most entries one `file_list` returns; beyond it the listing says it was cut.
pub(crate) const MAX_LIST_ENTRIES: usize = 1000;

/// Input of `file_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FileReadInput {
    /// Path of the file, relative to the workspace root. An absolute path is accepted only if it lies
    /// inside the workspace.
    path: String,
    /// Byte offset to start reading at. To continue a truncated read, pass the previous
    /// `offset_bytes` plus the `bytes` it returned.
    #[serde(default)]
    offset_bytes: u64,
    /// The most bytes to return. Defaults to, and is capped at, the configured limit (1 MiB unless
    /// configured otherwise).
    #[serde(default)]
    max_bytes: Option<usize>,
}

/// Output of `file_read`.
#[derive(Debug, Serialize, JsonSchema)]
struct FileReadOutput {
    /// The file's path relative to the workspace root, after resolving symlinks.
    path: String,
    /// The bytes read, decoded as UTF-8; invalid sequences appear as U+FFFD.
    content: String,
    /// How many bytes of the file `content` covers.
    bytes: u64,
    /// The file's total size in bytes.
    total_bytes: u64,
    /// True when the file continues past what was returned; read on from `offset_bytes + bytes`.
    truncated: bool,
}

/// Input of `file_write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FileWriteInput {
    /// Path of the file, relative to the workspace root. Missing parent directories are created.
    path: String,
    /// The text to write.
    content: String,
    /// Append to the end of the file instead of replacing its contents.
    #[serde(default)]
    append: bool,
}

/// Output of `file_write`.
#[derive(Debug, Serialize, JsonSchema)]
struct FileWriteOutput {
    /// The written file's path relative to the workspace root.
    path: String,
    /// How many bytes were written.
    bytes_written: u64,
}

/// Input of `file_list`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct FileListInput {
    /// Directory to list, relative to the workspace root; the root itself by default.
    #[serde(default = "current_dir")]
    path: String,
    /// Also list the contents of subdirectories (symlinked directories are listed, never entered).
    #[serde(default)]
    recursive: bool,
}

fn current_dir() -> String {
    ".".to_string()
}

/// What a listed entry is. Symlinks are reported as such and not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum EntryKind {
    File,
    Dir,
    Symlink,
}

/// One entry of a listing.
#[derive(Debug, Serialize, JsonSchema)]
struct ListEntry {
    /// The entry's path relative to the workspace root.
    path: String,
    /// `file`, `dir` or `symlink`; a symlink is never followed.
    kind: EntryKind,
    /// Size in bytes for files; 0 for directories and symlinks.
    bytes: u64,
}

/// Output of `file_list`.
#[derive(Debug, Serialize, JsonSchema)]
struct FileListOutput {
    /// The entries, sorted by name within each directory; in a recursive listing each directory is
    /// followed by its contents.
    entries: Vec<ListEntry>,
    /// True when the listing stopped at 1000 entries; list a subdirectory to see more.
    truncated: bool,
}

/// Why a file tool call failed.
#[derive(Debug, thiserror::Error)]
enum FileError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("could not {action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the file tool task stopped unexpectedly: {0}")]
    Task(#[from] tokio::task::JoinError),
}

fn io_error(action: &'static str, path: &str) -> impl FnOnce(std::io::Error) -> FileError + use<> {
    let path = path.to_string();
    move |source| FileError::Io {
        action,
        path,
        source,
    }
}

/// A path relative to the root, spelled with `/` and `.` for the root itself.
fn shown(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    if relative.as_os_str().is_empty() {
        ".".to_string()
    } else {
        relative.to_string_lossy().into_owned()
    }
}

pub(crate) fn file_read(workspace: Arc<Workspace>, max_file_bytes: usize) -> LocalTool {
    LocalTool::typed(
        "file_read",
        "Read a text file from the workspace. Paths are relative to the workspace root; nothing \
         outside it can be read. Large files are returned in parts: when `truncated` is true, call \
         again with `offset_bytes` advanced by `bytes`.",
        move |input: FileReadInput| {
            let workspace = workspace.clone();
            async move {
                tokio::task::spawn_blocking(move || read(&workspace, input, max_file_bytes)).await?
            }
        },
    )
}

fn read(
    workspace: &Workspace,
    input: FileReadInput,
    max_file_bytes: usize,
) -> Result<FileReadOutput, FileError> {
    let path = input.path.as_str();
    let (mut file, resolved) = workspace.open_read(path)?;
    let total_bytes = file.metadata().map_err(io_error("inspect", path))?.len();
    let cap = input
        .max_bytes
        .unwrap_or(max_file_bytes)
        .min(max_file_bytes);
    let offset = input.offset_bytes.min(total_bytes);
    file.seek(SeekFrom::Start(offset))
        .map_err(io_error("seek in", path))?;
    let mut buffer = Vec::with_capacity(cap.min(usize::try_from(total_bytes).unwrap_or(cap)));
    file.take(cap as u64)
        .read_to_end(&mut buffer)
        .map_err(io_error("read", path))?;
    let truncated = offset + (buffer.len() as u64) < total_bytes;
    let (content, bytes) = decode(buffer, truncated);
    Ok(FileReadOutput {
        path: shown(workspace.root(), &resolved),
        content,
        bytes: bytes as u64,
        total_bytes,
        // A character cut at the end was dropped, so the file may continue even at the exact cap.
        truncated: offset + (bytes as u64) < total_bytes,
    })
}

pub(crate) fn file_write(workspace: Arc<Workspace>) -> LocalTool {
    LocalTool::typed(
        "file_write",
        "Write a text file in the workspace, replacing it (or appending with `append: true`). Paths \
         are relative to the workspace root; missing parent directories are created; nothing outside \
         the workspace can be written.",
        move |input: FileWriteInput| {
            let workspace = workspace.clone();
            async move { tokio::task::spawn_blocking(move || write(&workspace, input)).await? }
        },
    )
    .sensitive()
}

fn write(workspace: &Workspace, input: FileWriteInput) -> Result<FileWriteOutput, FileError> {
    let path = input.path.as_str();
    let (mut file, target) = workspace.open_write(path)?;
    if input.append {
        file.seek(SeekFrom::End(0))
            .map_err(io_error("seek to the end of", path))?;
    } else {
        file.set_len(0).map_err(io_error("truncate", path))?;
    }
    file.write_all(input.content.as_bytes())
        .and_then(|()| file.flush())
        .map_err(io_error("write", path))?;
    Ok(FileWriteOutput {
        path: shown(workspace.root(), &target),
        bytes_written: input.content.len() as u64,
    })
}

pub(crate) fn file_list(workspace: Arc<Workspace>) -> LocalTool {
    LocalTool::typed(
        "file_list",
        "List a directory in the workspace (the root by default), optionally recursively. Each entry \
         gives its path relative to the workspace root, its kind (file, dir or symlink) and its size. \
         Symlinks are shown, never followed. At most 1000 entries are returned.",
        move |input: FileListInput| {
            let workspace = workspace.clone();
            async move { tokio::task::spawn_blocking(move || list(&workspace, input)).await? }
        },
    )
}

fn list(workspace: &Workspace, input: FileListInput) -> Result<FileListOutput, FileError> {
    let path = input.path.as_str();
    let start = workspace.resolve_existing(path)?;
    if !start.is_dir() {
        return Err(PathError::NotADirectory {
            path: path.to_string(),
        }
        .into());
    }
    let mut entries = Vec::new();
    let mut truncated = false;
    // Depth-first pre-order, sorted within each directory, so a recursive listing reads like `find`:
    // each directory is followed by its contents. The stack holds entries not yet emitted, pushed in
    // reverse so they come off in order.
    let mut pending: Vec<Child> = read_sorted(&start)
        .map_err(io_error("list", path))?
        .into_iter()
        .rev()
        .collect();
    while let Some((child, file_type, len)) = pending.pop() {
        if entries.len() == MAX_LIST_ENTRIES {
            truncated = true;
            break;
        }
        // The file type comes from the entry itself (lstat), so a symlink to a directory is a
        // symlink here and is never descended into.
        let kind = if file_type.is_symlink() {
            EntryKind::Symlink
        } else if file_type.is_dir() {
            EntryKind::Dir
        } else {
            EntryKind::File
        };
        if kind == EntryKind::Dir && input.recursive {
            match read_sorted(&child) {
                Ok(children) => pending.extend(children.into_iter().rev()),
                // A subdirectory that cannot be read (permissions, or removed meanwhile) is listed
                // without its contents rather than failing the whole listing.
                Err(source) => {
                    tracing::debug!(dir = %child.display(), %source, "file_list skipped a directory");
                }
            }
        }
        entries.push(ListEntry {
            path: shown(workspace.root(), &child),
            kind,
            bytes: if kind == EntryKind::File { len } else { 0 },
        });
    }
    Ok(FileListOutput { entries, truncated })
}

type Child = (std::path::PathBuf, std::fs::FileType, u64);

fn read_sorted(dir: &Path) -> std::io::Result<Vec<Child>> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_type = entry.file_type()?;
        let len = if file_type.is_file() {
            entry.metadata().map(|m| m.len()).unwrap_or(0)
        } else {
            0
        };
        children.push((entry.path(), file_type, len));
    }
    children.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(children)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use serde_json::json;

    use super::*;
    use crate::test_support::{call, err, ok};

    struct Fixture {
        _dir: tempfile::TempDir,
        outside: tempfile::TempDir,
        workspace: Arc<Workspace>,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let outside = tempfile::tempdir().unwrap();
            let workspace = Arc::new(Workspace::open(&dir.path().join("ws"), &[]).unwrap());
            Fixture {
                _dir: dir,
                outside,
                workspace,
            }
        }

        fn root(&self) -> &Path {
            self.workspace.root()
        }
    }

    #[tokio::test]
    async fn write_then_read_then_append() {
        let f = Fixture::new();
        let write = file_write(f.workspace.clone());
        let read = file_read(f.workspace.clone(), 1024);

        let written = call(
            &write,
            json!({"path": "notes/today.txt", "content": "hello\n"}),
        )
        .await;
        assert_eq!(
            ok(&written),
            &json!({"path": "notes/today.txt", "bytes_written": 6})
        );
        assert_eq!(
            std::fs::read_to_string(f.root().join("notes/today.txt")).unwrap(),
            "hello\n"
        );
        let appended = call(
            &write,
            json!({"path": "notes/today.txt", "content": "world\n", "append": true}),
        )
        .await;
        assert_eq!(ok(&appended)["bytes_written"], 6);

        let result = call(&read, json!({"path": "notes/today.txt"})).await;
        assert_eq!(
            ok(&result),
            &json!({
                "path": "notes/today.txt",
                "content": "hello\nworld\n",
                "bytes": 12,
                "total_bytes": 12,
                "truncated": false,
            })
        );

        // Replacing shortens the file rather than overwriting its start.
        call(&write, json!({"path": "notes/today.txt", "content": "bye"})).await;
        let result = call(&read, json!({"path": "./notes/../notes/today.txt"})).await;
        assert_eq!(ok(&result)["content"], "bye");

        // An absolute path inside the workspace is fine.
        let absolute = f.root().join("notes/today.txt");
        let result = call(&read, json!({"path": absolute.to_str().unwrap()})).await;
        assert_eq!(ok(&result)["content"], "bye");
    }

    #[tokio::test]
    async fn reads_are_capped_and_can_continue() {
        let f = Fixture::new();
        std::fs::write(f.root().join("big.txt"), "0123456789").unwrap();
        let read = file_read(f.workspace.clone(), 4);
        let first = call(&read, json!({"path": "big.txt"})).await;
        assert_eq!(
            ok(&first),
            &json!({"path": "big.txt", "content": "0123", "bytes": 4, "total_bytes": 10, "truncated": true})
        );
        let next = call(
            &read,
            json!({"path": "big.txt", "offset_bytes": 8, "max_bytes": 100}),
        )
        .await;
        assert_eq!(ok(&next)["content"], "89");
        assert_eq!(ok(&next)["truncated"], false);
        let small = call(
            &read,
            json!({"path": "big.txt", "offset_bytes": 2, "max_bytes": 3}),
        )
        .await;
        assert_eq!(ok(&small)["content"], "234");
        let past = call(&read, json!({"path": "big.txt", "offset_bytes": 50})).await;
        assert_eq!(ok(&past)["content"], "");
        assert_eq!(ok(&past)["bytes"], 0);
    }

    #[tokio::test]
    async fn escapes_are_refused_and_name_the_workspace() {
        let f = Fixture::new();
        let root = f.root().display().to_string();
        let secret = f.outside.path().join("secret.txt");
        std::fs::write(&secret, "s3cret").unwrap();
        symlink(&secret, f.root().join("link.txt")).unwrap();
        std::fs::write(f.root().join("../x"), "sibling").unwrap();

        let read = file_read(f.workspace.clone(), 1024);
        let write = file_write(f.workspace.clone());
        for path in ["../x", "/etc/passwd", "link.txt", "a/../../x"] {
            let message = err(&call(&read, json!({"path": path})).await);
            assert!(
                message.contains("outside the workspace"),
                "{path}: {message}"
            );
            assert!(message.contains(&root), "{path}: {message}");
            let message = err(&call(&write, json!({"path": path, "content": "pwned"})).await);
            assert!(
                message.contains("outside the workspace"),
                "{path}: {message}"
            );
            assert!(message.contains(&root), "{path}: {message}");
        }
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "s3cret");
        assert_eq!(
            std::fs::read_to_string(f.root().join("../x")).unwrap(),
            "sibling"
        );
        assert_ne!(
            std::fs::read_to_string("/etc/passwd").unwrap_or_default(),
            "pwned"
        );
    }

    #[tokio::test]
    async fn read_errors_say_what_to_do() {
        let f = Fixture::new();
        std::fs::create_dir(f.root().join("dir")).unwrap();
        let read = file_read(f.workspace.clone(), 1024);
        let message = err(&call(&read, json!({"path": "missing.txt"})).await);
        assert!(message.contains("does not exist"), "{message}");
        assert!(message.contains("file_list"), "{message}");
        let message = err(&call(&read, json!({"path": "dir"})).await);
        assert!(message.contains("is a directory"), "{message}");
        let message = err(&call(&read, json!({"path": "x", "nonsense": 1})).await);
        assert!(message.contains("unknown field `nonsense`"), "{message}");
        let write = file_write(f.workspace.clone());
        let message = err(&call(&write, json!({"path": ".", "content": ""})).await);
        assert!(message.contains("workspace root itself"), "{message}");
        let message = err(&call(&write, json!({"path": "dir", "content": ""})).await);
        assert!(message.contains("is a directory"), "{message}");
    }

    #[tokio::test]
    async fn list_shows_kinds_and_does_not_follow_symlinks_out() {
        let f = Fixture::new();
        std::fs::write(f.outside.path().join("outside.txt"), "o").unwrap();
        std::fs::create_dir_all(f.root().join("src/deep")).unwrap();
        std::fs::write(f.root().join("src/main.rs"), "fn main() {}").unwrap();
        std::fs::write(f.root().join("src/deep/x.txt"), "xx").unwrap();
        std::fs::write(f.root().join("README"), "hi").unwrap();
        symlink(f.outside.path(), f.root().join("escape")).unwrap();

        let list = file_list(f.workspace.clone());
        let flat = call(&list, json!({})).await;
        assert_eq!(
            ok(&flat),
            &json!({"entries": [
                {"path": "README", "kind": "file", "bytes": 2},
                {"path": "escape", "kind": "symlink", "bytes": 0},
                {"path": "src", "kind": "dir", "bytes": 0},
            ], "truncated": false})
        );
        let tree = call(&list, json!({"recursive": true})).await;
        let paths: Vec<&str> = ok(&tree)["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "README",
                "escape",
                "src",
                "src/deep",
                "src/deep/x.txt",
                "src/main.rs"
            ]
        );
        assert!(!paths.iter().any(|p| p.contains("outside")));

        let sub = call(&list, json!({"path": "src/deep"})).await;
        assert_eq!(
            ok(&sub)["entries"],
            json!([{"path": "src/deep/x.txt", "kind": "file", "bytes": 2}])
        );
        let message = err(&call(&list, json!({"path": "escape"})).await);
        assert!(message.contains("outside the workspace"), "{message}");
        let message = err(&call(&list, json!({"path": "README"})).await);
        assert!(message.contains("not a directory"), "{message}");
        let message = err(&call(&list, json!({"path": ".."})).await);
        assert!(message.contains("outside the workspace"), "{message}");
    }

    #[tokio::test]
    async fn list_stops_at_the_cap() {
        let f = Fixture::new();
        for i in 0..(MAX_LIST_ENTRIES + 5) {
            std::fs::write(f.root().join(format!("f{i:05}")), "").unwrap();
        }
        let list = file_list(f.workspace.clone());
        let result = call(&list, json!({"path": "."})).await;
        let output = ok(&result);
        assert_eq!(
            output["entries"].as_array().unwrap().len(),
            MAX_LIST_ENTRIES
        );
        assert_eq!(output["entries"][0]["path"], "f00000");
        assert_eq!(output["truncated"], true);
    }
}
