"""The broker's access control: settings -> store, guard on the listen ports, reloads, inner user.

`aclEnable=true` (4.9) turns authentication and authorization on and reads plain_acl.yml from
``$ROCKETMQ_HOME/conf``; `authenticationEnabled` / `authorizationEnabled` (5.3) turn each on
with the users and rules of ``<authConfigPath or storePathRootDir/config>``.  As 5.3's
`initUser` does, `initAuthenticationUser` ({"username","password"}) and
`innerClientAuthenticationCredentials` ({"accessKey","secretKey"}) are created as SUPER users
when absent; the inner credential also signs this broker's own requests (registration, slave
sync, role changes).  With authentication on and no user at all the broker does not start.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from engine.auth.errors import AuthConfigError
from engine.auth.guard import AccessGuard, AuthTables
from engine.auth.model import UserType
from engine.auth.needs import broker_needs, needs_key
from engine.auth.settings import parse_credentials, super_users
from engine.auth.store import AuthStore
from engine.broker.config import BrokerConfig
from engine.broker.services import PeriodicService
from engine.protocol.signature import Credentials
from engine.remoting.server import RemotingServer

log = logging.getLogger("engine.auth")

RELOAD_INTERVAL_S = 5.0  # 4.9.7 AclFileWatchService polls every 5 s


def inner_credentials(config: BrokerConfig) -> Credentials | None:
    """The credential this broker signs its own requests with (None when not configured).

    Raises:
        AuthConfigError: the setting is not JSON with accessKey and secretKey.
    """
    return parse_credentials(config.inner_client_authentication_credentials)


class BrokerAccess:
    """Owns the store and the guard; `start` loads and installs, `reconfigure` follows changes."""

    def __init__(self, config: BrokerConfig, config_dir: str,
                 servers: Callable[[], list[RemotingServer[Any]]]) -> None:
        self.config = config
        self._servers = servers
        home = config.rocketmq_home if config.acl_enable else None
        self.store = AuthStore(config.auth_config_path or config_dir,
                               rocketmq_home=home, on_change=self._install)
        self.guard: AccessGuard | None = None
        self.reloader = PeriodicService("auth-reload", RELOAD_INTERVAL_S, self._reload)

    @property
    def authentication(self) -> bool:
        return self.config.acl_enable or self.config.authentication_enabled

    @property
    def authorization(self) -> bool:
        return self.config.acl_enable or self.config.authorization_enabled

    @property
    def enabled(self) -> bool:
        return self.authentication or self.authorization

    def start(self) -> None:
        """Load users and rules, create the init/inner users, install the guard.

        Raises:
            AuthError: unreadable files, bad settings, or authentication on and no user.
        """
        cfg = self.config
        if cfg.acl_enable and not cfg.rocketmq_home:
            raise AuthConfigError("aclEnable=true but ROCKETMQ_HOME is not set: plain_acl.yml "
                                  "is read from $ROCKETMQ_HOME/conf/plain_acl.yml and "
                                  "$ROCKETMQ_HOME/conf/acl/*.yml")
        self.store.load()
        for user in super_users(cfg.init_authentication_user,
                                cfg.inner_client_authentication_credentials):
            if self.store.user(user.username) is None:
                self.store.create_user(user)
                log.info("created SUPER user %r from the broker settings", user.username)
        if self.authentication and not self.store.tables().users:
            where = (f"{os.path.join(cfg.rocketmq_home, 'conf', 'plain_acl.yml')} (aclEnable)"
                     if cfg.acl_enable else self.store.users_path)
            raise AuthConfigError(
                "authentication is on but there is no user: add accounts to " + where +
                ", or set initAuthenticationUser={\"username\":...,\"password\":...}")
        self._install(self.store.tables())
        if self.enabled:
            self.reloader.start()

    async def stop(self) -> None:
        await self.reloader.stop()

    def reconfigure(self, config: BrokerConfig) -> None:
        """Follow UPDATE_BROKER_CONFIG of authenticationEnabled / authorizationEnabled."""
        self.config = config
        self._install(self.store.tables())

    def _install(self, tables: AuthTables) -> None:
        if not self.enabled:
            self.guard = None
        else:
            cluster = self.config.broker_cluster_name
            if self.guard is None or (self.guard.authentication, self.guard.authorization) != (
                    self.authentication, self.authorization):
                self.guard = AccessGuard(lambda cmd: broker_needs(cmd, cluster),
                                         authentication=self.authentication,
                                         authorization=self.authorization,
                                         needs_key=needs_key)
            self.guard.install(tables)
        for server in self._servers():
            server.set_guard(self.guard)

    def _reload(self) -> None:
        self.store.reload()

    def inner_credentials(self) -> Credentials | None:
        return inner_credentials(self.config)

    def is_super(self, access_key: str | None) -> bool:
        """Whether the request's AccessKey names a SUPER user (True when auth is off)."""
        if not access_key:
            return not self.enabled
        user = self.store.tables().users.get(access_key)
        return user is not None and user.user_type is UserType.SUPER
