//! The tools the gateway answers itself: the funnel's meta-tools ([`funnel`]), the
//! management tools ([`management`]), a user's own connections ([`connections`]) and the
//! tool search ([`search`]).

pub(crate) mod connections;
pub(crate) mod funnel;
pub(crate) mod management;
pub(crate) mod search;
