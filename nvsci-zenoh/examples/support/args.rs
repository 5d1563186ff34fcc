//! `--name value` arguments of the examples.
#![allow(dead_code)]

/// The value after `--name`, parsed, or `default`.
pub fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => match args.get(i + 1).map(|v| v.parse()) {
            Some(Ok(v)) => v,
            _ => {
                eprintln!("{name} needs a value");
                std::process::exit(2)
            }
        },
        None => default,
    }
}

/// Every value given after `--name` (the flag may repeat).
pub fn args(name: &str) -> Vec<String> {
    let a: Vec<String> = std::env::args().collect();
    a.windows(2).filter(|w| w[0] == name).map(|w| w[1].clone()).collect()
}
