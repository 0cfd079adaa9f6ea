//! Signing and credentials.

pub mod credentials;
pub mod sigv4;

pub use credentials::CredentialsProvider;
pub use sigv4::Credentials;
