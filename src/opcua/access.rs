//! `Access`: the server's `AuthManager`: which identities each endpoint
//! takes (what GetEndpoints shows) and the check at ActivateSession.
//!
//! ```text
//! [opcua] listen   endpoint (security)                                  anonymous   user of users_file
//! loopback         None                                                  yes         no (the password would travel in clear)
//! loopback         Basic256Sha256, Aes256Sha256RsaPss; Sign, SignAndEncrypt  yes     yes
//! any other        the secure ones only (`security::endpoints`)          refused     yes
//! ```
//!
//! A refused login is counted and logged (the first `REFUSALS_LOGGED` of
//! each `REFUSAL_WINDOW`, then a count: a password guesser does not flood
//! the journal) with the user name it gave, never the password (`users`
//! keeps only digests; async-opcua hands the password over in a `Password`
//! whose `Debug` hides it).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_opcua::crypto::SecurityPolicy;
use async_opcua::server::ServerEndpoint;
use async_opcua::server::authenticator::{
    AuthManager, Password, UserToken, user_pass_security_policy_id,
};
use async_opcua::types::{Error, StatusCode, UAString, UserTokenPolicy, UserTokenType};

use super::users::Users;

/// The anonymous token policy's id; async-opcua checks the client's token
/// against its own constant of this value (`identity_token.rs`, private).
const POLICY_ID_ANONYMOUS: &str = "anonymous";
/// Refused logins logged per window; the rest are counted.
const REFUSALS_LOGGED: u32 = 10;
const REFUSAL_WINDOW: Duration = Duration::from_secs(60);
/// A user name is logged at most this long (a client chooses it).
const NAME_LOGGED: usize = 64;

/// Who may log in on which endpoint.
pub struct Access {
    /// Anonymous clients are taken (the server listens on loopback).
    anonymous: bool,
    users: Users,
    refused: AtomicU64,
    log: Mutex<Burst>,
}

/// The refusals logged in the current window.
struct Burst {
    since: Instant,
    logged: u32,
}

impl Burst {
    /// Whether a refusal now is logged.
    fn admit(&mut self) -> bool {
        if self.since.elapsed() >= REFUSAL_WINDOW {
            self.since = Instant::now();
            self.logged = 0;
        }
        self.logged += 1;
        self.logged <= REFUSALS_LOGGED
    }
}

impl Access {
    pub fn new(loopback: bool, users: Users) -> Access {
        Access {
            anonymous: loopback,
            users,
            refused: AtomicU64::new(0),
            log: Mutex::new(Burst {
                since: Instant::now(),
                logged: 0,
            }),
        }
    }

    /// Logins refused since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn refuse(&self, who: &str, why: &'static str, code: StatusCode) -> Error {
        let total = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let due = self.log.lock().map(|mut l| l.admit()).unwrap_or(true);
        if due {
            log::warn!(target: "sealcheck::opcua", who = who, refused = total;
                "OPC UA login refused ({who}): {why} ({total} refused since start; the first {REFUSALS_LOGGED} a minute are logged)");
        }
        Error::new(code, why)
    }
}

/// A client's user name as the log shows it: escaped, cut short.
fn logged_name(name: &str) -> String {
    let mut shown: String = name.chars().take(NAME_LOGGED).collect();
    if name.chars().count() > NAME_LOGGED {
        shown.push('…');
    }
    format!("user {:?}", shown)
}

#[async_trait::async_trait]
impl AuthManager for Access {
    async fn authenticate_anonymous_token(&self, _endpoint: &ServerEndpoint) -> Result<(), Error> {
        if self.anonymous {
            return Ok(());
        }
        Err(self.refuse(
            "anonymous",
            "anonymous clients are refused: the server listens off loopback; log in with a user of [opcua] users_file",
            StatusCode::BadIdentityTokenRejected,
        ))
    }

    async fn authenticate_username_identity_token(
        &self,
        endpoint: &ServerEndpoint,
        username: &str,
        password: &Password,
    ) -> Result<UserToken, Error> {
        if endpoint.security_policy() == SecurityPolicy::None {
            return Err(self.refuse(
                &logged_name(username),
                "a user logs in on a secure endpoint only (Basic256Sha256 or Aes256Sha256RsaPss)",
                StatusCode::BadIdentityTokenRejected,
            ));
        }
        if self.users.check(username, password.get()) {
            log::debug!(target: "sealcheck::opcua", "OPC UA login: {}", logged_name(username));
            return Ok(UserToken(username.to_string()));
        }
        Err(self.refuse(
            &logged_name(username),
            "wrong user name or password",
            StatusCode::BadUserAccessDenied,
        ))
    }

    fn user_token_policies(&self, endpoint: &ServerEndpoint) -> Vec<UserTokenPolicy> {
        let secure = endpoint.security_policy() != SecurityPolicy::None;
        let mut policies = Vec::with_capacity(2);
        if self.anonymous {
            policies.push(UserTokenPolicy {
                policy_id: UAString::from(POLICY_ID_ANONYMOUS),
                token_type: UserTokenType::Anonymous,
                issued_token_type: UAString::null(),
                issuer_endpoint_url: UAString::null(),
                security_policy_uri: UAString::null(),
            });
        }
        if secure && !self.users.is_empty() {
            policies.push(UserTokenPolicy {
                policy_id: user_pass_security_policy_id(endpoint),
                token_type: UserTokenType::UserName,
                issued_token_type: UAString::null(),
                issuer_endpoint_url: UAString::null(),
                // Empty: the password is encrypted with the endpoint's own policy.
                security_policy_uri: UAString::null(),
            });
        }
        policies
    }
}

#[cfg(test)]
mod tests {
    use async_opcua::types::MessageSecurityMode;

    use super::*;

    fn endpoint(policy: SecurityPolicy, mode: MessageSecurityMode) -> ServerEndpoint {
        ServerEndpoint::new("/", policy, mode, &[])
    }

    fn run<T>(f: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn off_loopback_anonymous_is_refused_and_a_user_logs_in_on_a_secure_endpoint_only() {
        let access = Access::new(false, Users::parse("plc:hunter2").unwrap());
        let none = endpoint(SecurityPolicy::None, MessageSecurityMode::None);
        let secure = endpoint(
            SecurityPolicy::Basic256Sha256,
            MessageSecurityMode::SignAndEncrypt,
        );
        assert!(run(access.authenticate_anonymous_token(&secure)).is_err());
        let ok = run(access.authenticate_username_identity_token(
            &secure,
            "plc",
            &Password::new("hunter2".into()),
        ));
        assert_eq!(ok.unwrap(), UserToken("plc".into()));
        let wrong = run(access.authenticate_username_identity_token(
            &secure,
            "plc",
            &Password::new("hunter3".into()),
        ));
        assert_eq!(wrong.unwrap_err().status(), StatusCode::BadUserAccessDenied);
        let in_clear = run(access.authenticate_username_identity_token(
            &none,
            "plc",
            &Password::new("hunter2".into()),
        ));
        assert!(in_clear.is_err());
        assert_eq!(access.refused(), 3);
        let kinds = |e: &ServerEndpoint| -> Vec<UserTokenType> {
            access
                .user_token_policies(e)
                .iter()
                .map(|p| p.token_type)
                .collect()
        };
        assert_eq!(kinds(&secure), [UserTokenType::UserName]);
        assert!(kinds(&none).is_empty());
    }

    #[test]
    fn on_loopback_anonymous_clients_are_taken_everywhere() {
        let access = Access::new(true, Users::default());
        let none = endpoint(SecurityPolicy::None, MessageSecurityMode::None);
        assert!(run(access.authenticate_anonymous_token(&none)).is_ok());
        assert_eq!(
            access.user_token_policies(&none)[0].policy_id.as_ref(),
            POLICY_ID_ANONYMOUS
        );
        assert!(logged_name(&"x".repeat(100)).ends_with("…\""));
    }
}
