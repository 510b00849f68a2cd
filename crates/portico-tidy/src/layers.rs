//! The layer diagram is the Cargo graph: ARCHITECTURE.md's `layers` block lists every workspace crate,
//! top layer first, each with the workspace crates it may depend on, and those are exactly its normal
//! and build dependencies in `cargo metadata` (dev-dependencies are not layering: a test may use
//! anything). Each crate is listed above everything it depends on, and no product crate depends on a
//! tooling crate.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use crate::source::{read, workspace_root};

const DOC: &str = "ARCHITECTURE.md";
const FENCE: &str = "```layers";

/// One line of the `layers` block.
struct Layer {
    name: String,
    tooling: bool,
    allowed: BTreeSet<String>,
}

/// The `layers` block, in its order (top layer first).
fn documented_layers() -> Vec<Layer> {
    let doc = read(DOC);
    let block = doc
        .split_once(FENCE)
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .map(|(block, _)| block)
        .unwrap_or_else(|| {
            panic!(
                "{DOC} has no {FENCE} block: put the crates' layering back under \"Bird's-eye view\", \
                 one line per crate, `name: dependencies…` (see git history)"
            )
        });
    block
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (head, deps) = line.split_once(':').unwrap_or_else(|| {
                panic!("{DOC}, {FENCE} block: `{line}` is not `crate: dependencies…`")
            });
            let (tooling, name) = match head.trim().strip_prefix("tooling ") {
                Some(name) => (true, name.trim()),
                None => (false, head.trim()),
            };
            Layer {
                name: full_name(name),
                tooling,
                allowed: deps.split_whitespace().map(full_name).collect(),
            }
        })
        .collect()
}

/// The block writes crates without their `portico-` prefix (`mcp-server` is `portico-mcp-server`);
/// the binary is `portico`.
fn full_name(short: &str) -> String {
    if short == "portico" {
        short.to_string()
    } else {
        format!("portico-{short}")
    }
}

/// A crate's name as the block writes it.
fn short_name(full: &str) -> &str {
    full.strip_prefix("portico-").unwrap_or(full)
}

/// Each workspace crate and the workspace crates it depends on (normal and build dependencies).
fn cargo_graph() -> BTreeMap<String, BTreeSet<String>> {
    let output = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(workspace_root())
        .output()
        .expect("running `cargo metadata`");
    assert!(
        output.status.success(),
        "`cargo metadata --no-deps` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("`cargo metadata` prints JSON");
    let packages = metadata["packages"]
        .as_array()
        .expect("`cargo metadata` lists packages");
    let members: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|package| {
            let deps = package["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null() || d["kind"] == "build")
                .filter(|d| d["path"].is_string())
                .filter_map(|d| d["name"].as_str())
                .filter(|name| members.contains(name))
                .map(str::to_string)
                .collect();
            (
                package["name"].as_str().unwrap_or_default().to_string(),
                deps,
            )
        })
        .collect()
}

/// What is wrong between the documented layers and the Cargo graph, one line per problem.
fn problems(layers: &[Layer], graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut position = BTreeMap::new();
    for (index, layer) in layers.iter().enumerate() {
        let short = short_name(&layer.name);
        if position.insert(layer.name.as_str(), index).is_some() {
            problems.push(format!(
                "`{short}` has two lines in the layers block: keep one"
            ));
        }
        if !graph.contains_key(&layer.name) {
            problems.push(format!(
                "the layers block lists `{short}`, but there is no workspace crate `{}`: delete \
                 its line (and its place in the diagram) or fix the name",
                layer.name
            ));
        }
    }
    for crate_name in graph.keys() {
        if !position.contains_key(crate_name.as_str()) {
            let short = short_name(crate_name);
            problems.push(format!(
                "workspace crate `{crate_name}` is not in the layers block: add a line \
                 `{short}: <its workspace dependencies>` above everything it depends on \
                 (`tooling {short}: …` if it is not product), and draw it in the diagram"
            ));
        }
    }
    let tooling: BTreeSet<&str> = layers
        .iter()
        .filter(|l| l.tooling)
        .map(|l| l.name.as_str())
        .collect();
    for layer in layers {
        let name = layer.name.as_str();
        let short = short_name(name);
        let actual = graph.get(name).cloned().unwrap_or_default();
        for dep in actual.difference(&layer.allowed) {
            let dep_short = short_name(dep);
            problems.push(format!(
                "crates/{name}/Cargo.toml depends on `{dep}`, which the layers block does not allow \
                 `{short}`: remove the dependency, or, if the layering really changes, add \
                 `{dep_short}` to `{short}`'s line and draw the edge in the diagram"
            ));
        }
        for dep in layer.allowed.difference(&actual) {
            let dep_short = short_name(dep);
            problems.push(format!(
                "the layers block lets `{short}` depend on `{dep_short}`, but crates/{name}/Cargo.toml \
                 has no such (non-dev) dependency: delete `{dep_short}` from `{short}`'s line and \
                 the edge from the diagram"
            ));
        }
        for dep in &layer.allowed {
            let dep_short = short_name(dep);
            let (Some(&above), Some(&below)) = (position.get(name), position.get(dep.as_str()))
            else {
                continue;
            };
            if below <= above {
                problems.push(format!(
                    "`{short}` depends on `{dep_short}`, but `{dep_short}` is listed above it: the \
                     layers block is top layer first, so move `{dep_short}`'s line below \
                     `{short}`'s (and in the diagram)"
                ));
            }
            if !layer.tooling && tooling.contains(dep.as_str()) {
                problems.push(format!(
                    "product crate `{name}` depends on tooling crate `{dep}`: product code must not \
                     need test or bench tooling; move what it uses into a product crate"
                ));
            }
        }
    }
    problems
}

#[test]
fn the_layers_in_architecture_md_are_the_cargo_graph() {
    let problems = problems(&documented_layers(), &cargo_graph());
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's layers and the Cargo graph disagree:\n- {}",
        problems.join("\n- ")
    );
}

#[test]
fn every_disagreement_is_named() {
    let layers = vec![
        Layer {
            name: "top".into(),
            tooling: false,
            allowed: ["bottom".to_string(), "ghost".to_string()].into(),
        },
        Layer {
            name: "bottom".into(),
            tooling: false,
            allowed: ["bench".to_string()].into(),
        },
        Layer {
            name: "bench".into(),
            tooling: true,
            allowed: ["top".to_string()].into(),
        },
    ];
    let graph = BTreeMap::from([
        ("top".to_string(), ["bottom".to_string()].into()),
        (
            "bottom".to_string(),
            ["bench".to_string(), "top".to_string()].into(),
        ),
        ("bench".to_string(), ["top".to_string()].into()),
        ("unlisted".to_string(), BTreeSet::new()),
    ]);
    let problems = problems(&layers, &graph).join("\n");
    for expected in [
        "workspace crate `unlisted` is not in the layers block",
        "crates/bottom/Cargo.toml depends on `top`, which the layers block does not allow",
        "the layers block lets `top` depend on `ghost`, but crates/top/Cargo.toml has no such",
        "product crate `bottom` depends on tooling crate `bench`",
        "`bench` depends on `top`, but `top` is listed above it",
    ] {
        assert!(
            problems.contains(expected),
            "missing {expected:?} in:\n{problems}"
        );
    }
}
