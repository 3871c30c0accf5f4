//! The tools the gateway answers itself: the funnel's meta-tools ([`funnel`]) and the
//! management tools ([`management`]).

pub(crate) mod funnel;
pub(crate) mod management;
