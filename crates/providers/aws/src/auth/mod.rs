//! Signing and credentials: SigV4, the SDKs' settings (environment and shared files), the
//! default credentials chain and the region chain.

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
