//! common
