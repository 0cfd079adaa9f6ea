//! Signing and credentials: SigV4, the SDKs' settings (environment and shared files), the
//! default credentials chain and the region chain.
//!
//! Why not `aws-config`: measured in a scratch crate, its default build adds 81 crates the
//! workspace lacks (`aws-lc-rs` and its C library beside our ring, HTTP/2, the STS/SSO/SSO-OIDC
//! clients), 53 s of clean build on 2 cores and 0.8 GB of target; without its HTTPS client it
//! still adds 75, and it covers neither retries nor endpoints for our hand-written calls. The
//! SDKs' behaviour is matched here instead, one test per source.

pub mod config;
pub mod credentials;
pub mod metadata;
pub mod process;
pub mod profile;
pub mod region;
pub mod sigv4;
pub mod sso;
pub mod sts;

pub use config::SharedConfig;
pub use credentials::CredentialsProvider;
pub use sigv4::Credentials;
