"""The name server's access control: with `authenticationEnabled`, changes need a SUPER user.

Reads (routes, cluster info, KV reads, settings) stay open, so every client keeps working;
the requests that change something (PUT/DELETE_KV_CONFIG, REGISTER/UNREGISTER_BROKER,
WIPE/ADD_WRITE_PERM_OF_BROKER, DELETE_TOPIC_IN_NAMESRV, UPDATE_NAMESRV_CONFIG) must be signed
by `initAuthenticationUser` or `innerClientAuthenticationCredentials` (what brokers sign their
registrations with).  Apache's name server has no access control; this is the engine's own.
"""

from __future__ import annotations

from engine.auth.errors import AuthConfigError
from engine.auth.guard import AccessGuard, AuthTables
from engine.auth.settings import super_users
from engine.namesrv.config import NamesrvConfig
from engine.protocol.codes import RequestCode as C
from engine.protocol.command import RemotingCommand

MUTATIONS = frozenset({C.PUT_KV_CONFIG, C.DELETE_KV_CONFIG, C.REGISTER_BROKER,
                       C.UNREGISTER_BROKER, C.WIPE_WRITE_PERM_OF_BROKER,
                       C.ADD_WRITE_PERM_OF_BROKER, C.DELETE_TOPIC_IN_NAMESRV,
                       C.UPDATE_NAMESRV_CONFIG})


class NamesrvGuard:
    """Checks the changing requests only; None when the request may go on."""

    def __init__(self, config: NamesrvConfig) -> None:
        """
        Raises:
            AuthConfigError: authentication on and no SUPER user configured, or bad settings.
        """
        users = super_users(config.init_authentication_user,
                            config.inner_client_authentication_credentials)
        if not users:
            raise AuthConfigError("authenticationEnabled=true but there is no user: set "
                                  "initAuthenticationUser and innerClientAuthentication"
                                  "Credentials (the brokers' credential)")
        self.guard = AccessGuard(lambda cmd: [], authentication=True, authorization=True,
                                 super_only=True)
        self.guard.install(AuthTables({u.username: u for u in users}))

    def __call__(self, cmd: RemotingCommand, remote_addr: str) -> RemotingCommand | None:
        if cmd.code not in MUTATIONS:
            return None
        return self.guard(cmd, remote_addr)
