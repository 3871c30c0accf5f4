//! The tools the gateway answers itself: the funnel's meta-tools ([`funnel`]), the
//! management tools ([`management`]) and a user's own connections ([`connections`]).

pub(crate) mod connections;
pub(crate) mod funnel;
pub(crate) mod management;
