//! The README's first program is `examples/quickstart.rs`, byte for byte,
//! so what a newcomer copies is what CI builds and runs.

#[test]
fn the_readme_embedding_snippet_is_the_quickstart_example() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let example = std::fs::read_to_string(format!("{root}/examples/quickstart.rs")).unwrap();
    let start = readme
        .find("```rust\n")
        .expect("README.md has a ```rust block")
        + "```rust\n".len();
    let len = readme[start..]
        .find("```")
        .expect("README.md's first ```rust block is closed");
    let snippet = &readme[start..start + len];
    if snippet != example {
        let first = snippet
            .lines()
            .zip(example.lines())
            .position(|(a, b)| a != b)
            .map_or(snippet.lines().count().min(example.lines().count()), |i| i);
        panic!(
            "README.md's first ```rust block differs from examples/quickstart.rs at line {}:\n  README:  {:?}\n  example: {:?}\n(paste the example into the README)",
            first + 1,
            snippet.lines().nth(first),
            example.lines().nth(first)
        );
    }
}
