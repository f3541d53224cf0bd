//! HTTP routes, one module per area; [`crate::app`] merges their routers.

pub(crate) mod admin;
pub(crate) mod auth;
pub(crate) mod files;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod share;
pub(crate) mod uploads;
pub(crate) mod web;
