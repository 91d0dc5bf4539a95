"""Access-control commands of 4.9 (ACL 1.0, plain_acl.yml): updateAclConfig, deleteAclConfig,
clusterAclConfigVersion, updateGlobalWhiteAddr.  Unlike Apache's, they never print a secret."""

from __future__ import annotations

from typing import Annotated

import typer

from engine.protocol.body.auth import PlainAccessConfig
from mqadmin import credentials, render
from mqadmin.commands import endpoint, guarded, mutate, params, with_admin
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.acl import v1 as ops
from mqadmin.operations.mutation import settle
from mqadmin.options import (
    BrokerAddrOpt,
    ClusterOpt,
    ContextOpt,
    DebugOpt,
    DryRunOpt,
    Flag,
    NamesrvOpt,
    OutputOpt,
    YesOpt,
    one_target,
)
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Access control"
AccessKeyOpt = Annotated[str, typer.Option("-a", "--accessKey", help="The account's AccessKey.")]


def _split(text: str | None) -> list[str] | None:
    parts = [p.strip() for p in (text or "").split(",") if p.strip()]
    return parts or None


@app.command("updateAclConfig", rich_help_panel=PANEL)
def update_acl_config(
    ctx: typer.Context, access_key: AccessKeyOpt,
    secret_key: Annotated[str | None, typer.Option(
        "-s", "--secretKey", help="The SecretKey; prefer --secret-key-file.")] = None,
    secret_key_file: Annotated[str | None, typer.Option(
        "--secret-key-file", metavar="FILE", help="File holding the SecretKey ('-': stdin).")
    ] = None,
    white: Annotated[str | None, typer.Option(
        "-w", "--whiteRemoteAddress", help="Addresses needing no signature, e.g. 10.1.1.*")
    ] = None,
    default_topic_perm: Annotated[str | None, typer.Option(
        "-i", "--defaultTopicPerm", help="PUB, SUB, PUB|SUB or DENY.")] = None,
    default_group_perm: Annotated[str | None, typer.Option(
        "-u", "--defaultGroupPerm", help="PUB, SUB, PUB|SUB or DENY.")] = None,
    topic_perms: Annotated[str | None, typer.Option(
        "-t", "--topicPerms", help="e.g. topicA=DENY,topicD=SUB")] = None,
    group_perms: Annotated[str | None, typer.Option(
        "-g", "--groupPerms", help="e.g. groupD=DENY,groupE=SUB")] = None,
    admin_flag: Annotated[Flag, typer.Option("-m", "--admin", help="Admin account.")
                          ] = Flag.FALSE,
    broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None, context: ContextOpt = None, yes: YesOpt = False,
    dry_run: DryRunOpt = False, output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False,
) -> None:
    """Create or replace an account in the brokers' plain_acl.yml (4.9, aclEnable=true)."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        if bool(secret_key) == bool(secret_key_file):
            raise UsageProblem("give the SecretKey with --secret-key-file FILE (or -s).")
        secret = credentials.read_secret_file(secret_key_file) if secret_key_file else secret_key
        account = PlainAccessConfig(access_key.strip(), secret, white, bool(admin_flag),
                                    default_topic_perm, default_group_perm,
                                    _split(topic_perms), _split(group_perms))
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_acl_config(admin, account, broker_addr=b, cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("deleteAclConfig", rich_help_panel=PANEL)
def delete_acl_config(ctx: typer.Context, access_key: AccessKeyOpt,
                      broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
                      namesrv: NamesrvOpt = None, context: ContextOpt = None,
                      yes: YesOpt = False, dry_run: DryRunOpt = False,
                      output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False) -> None:
    """Delete an account from the brokers' ACL files (4.9)."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.delete_acl_config(admin, access_key.strip(), broker_addr=b,
                                                   cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("updateGlobalWhiteAddr", rich_help_panel=PANEL)
def update_global_white_addr(
    ctx: typer.Context,
    addrs: Annotated[str, typer.Option(
        "-g", "--globalWhiteRemoteAddresses", help="e.g. 10.10.103.*,192.168.0.*")],
    acl_file: Annotated[str | None, typer.Option(
        "-p", "--aclFileFullPath", help="Which ACL file (default conf/plain_acl.yml).")] = None,
    broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
    namesrv: NamesrvOpt = None, context: ContextOpt = None, yes: YesOpt = False,
    dry_run: DryRunOpt = False, output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False,
) -> None:
    """Replace the global white addresses (no signature needed from them) of an ACL file."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_global_white_addrs(admin, _split(addrs) or [],
                                                           acl_file, broker_addr=b, cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("clusterAclConfigVersion", rich_help_panel=PANEL)
def cluster_acl_config_version(broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
                               namesrv: NamesrvOpt = None, context: ContextOpt = None,
                               output: OutputOpt = OutputFormat.TABLE,
                               debug: DebugOpt = False) -> None:
    """The data version of every ACL file of each broker (4.9)."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        gathered = with_admin(endpoint(namesrv, context),
                              lambda admin: ops.version_rows(admin, broker_addr=b, cluster=c))
        render.render(gathered.rows, output, columns=ops.VERSION_COLUMNS)
        settle("clusterAclConfigVersion", gathered)
