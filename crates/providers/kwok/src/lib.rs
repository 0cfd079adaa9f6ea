//! The KWOK provider.
