//! The controller.
