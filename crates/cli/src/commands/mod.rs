//! One module per subcommand.

pub mod bench;

pub mod controller;
pub mod convert;
pub mod crds;
pub mod plan;
pub mod simulate;
pub mod validate;
pub mod what_if;
