//! Runtime expressions compile with jq ([`crate::jq`]): a string that is `${ ... }` anywhere, and a
//! field that is an expression by definition (`if`, `when`, `input.from`, `for.in`, ...), with or
//! without the `${ }`. The DSL's arguments (`$context`, `$input`, ...) are declared, and so are
//! the variables the enclosing tasks bind (`for.each`, `for.at`, `catch.as`, ...); any other
//! variable is an error, as it would be when the expression runs.

/// The arguments every runtime expression may use.
const ARGUMENTS: [&str; 8] = [
    "$context",
    "$input",
    "$output",
    "$secrets",
    "$authorization",
    "$task",
    "$workflow",
    "$runtime",
];

/// The query inside `${ ... }`, when `text` is written so (surrounding spaces allowed).
pub fn enclosed(text: &str) -> Option<&str> {
    text.trim()
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
}

/// Why `expression` (enclosed in `${ }` or not) does not compile, given the variables `vars`
/// (without their `$`) that its place binds.
pub fn check(expression: &str, vars: &[String]) -> Option<String> {
    let query = enclosed(expression).unwrap_or(expression);
    let bound: Vec<String> = vars.iter().map(|v| format!("${v}")).collect();
    let mut names: Vec<&str> = ARGUMENTS.to_vec();
    names.extend(bound.iter().map(String::as_str));
    crate::jq::compile_pure(query, &names).err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_compile_with_the_dsl_arguments_and_bound_variables() {
        assert_eq!(enclosed(" ${ .a } "), Some(" .a "));
        assert_eq!(enclosed(".a"), None);
        assert_eq!(check("${ $context.x + $input.y }", &[]), None);
        assert_eq!(check(".pets | length > 0", &[]), None);
        assert_eq!(check("${ $pet.id }", &["pet".to_owned()]), None);
        let unbound = check("${ $pet.id }", &[]).unwrap_or_default();
        assert!(unbound.contains("undefined variable"), "{unbound}");
        let broken = check("${ .a | }", &[]).unwrap_or_default();
        assert!(broken.contains("does not parse"), "{broken}");
    }
}
