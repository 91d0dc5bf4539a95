"""Access-control commands of 5.3 (ACL 2.0): createUser ... listUser, createAcl ... listAcl."""

from __future__ import annotations

from typing import Annotated

import typer

from mqadmin import credentials, render
from mqadmin.commands import endpoint, guarded, mutate, params, with_admin
from mqadmin.exit_codes import UsageProblem
from mqadmin.operations.acl import v2 as ops
from mqadmin.operations.mutation import Gathered, settle
from mqadmin.options import (
    BrokerAddrOpt,
    ClusterOpt,
    ContextOpt,
    DebugOpt,
    DryRunOpt,
    NamesrvOpt,
    OutputOpt,
    YesOpt,
    one_target,
)
from mqadmin.render import OutputFormat

app = typer.Typer()

PANEL = "Access control"

UserOpt = Annotated[str, typer.Option("-u", "--username", help="User name (the AccessKey).")]
PasswordOpt = Annotated[str | None, typer.Option(
    "-p", "--password", help="Password (the SecretKey); prefer --password-file.")]
PasswordFileOpt = Annotated[str | None, typer.Option(
    "--password-file", metavar="FILE", help="File holding the password ('-' reads stdin).")]
UserTypeOpt = Annotated[str | None, typer.Option("-t", "--userType", help="Super or Normal.")]
SubjectOpt = Annotated[str, typer.Option("-s", "--subject",
                                         help="Whose rules: User:name (or just the name).")]
ResourcesOpt = Annotated[str, typer.Option(
    "-r", "--resources", help="Comma-separated: Topic:t, Group:g, Topic:pre*, Topic:*, *.")]
ActionsOpt = Annotated[str, typer.Option(
    "-a", "--actions", help="Comma-separated: Pub, Sub, Create, Update, Delete, Get, List, All.")]
SourceIpOpt = Annotated[str | None, typer.Option(
    "-i", "--sourceIp", help="Comma-separated IPs or CIDRs the rule applies from.")]
DecisionOpt = Annotated[str, typer.Option("-d", "--decision", help="Allow or Deny.")]


def _password(password: str | None, password_file: str | None, *, required: bool) -> str | None:
    if password and password_file:
        raise UsageProblem("give --password or --password-file, not both.")
    if password_file:
        return credentials.read_secret_file(password_file)
    if required and not password:
        raise UsageProblem("give the password with --password-file FILE (or -p).")
    return password or None


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _show(rows_of: Gathered, output: OutputFormat, columns: tuple[str, ...],
          what: str) -> None:
    render.render(rows_of.rows, output, columns=columns)
    settle(what, rows_of)


@app.command("createUser", rich_help_panel=PANEL)
def create_user(ctx: typer.Context, username: UserOpt, password: PasswordOpt = None,
                password_file: PasswordFileOpt = None, user_type: UserTypeOpt = None,
                broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
                namesrv: NamesrvOpt = None, context: ContextOpt = None, yes: YesOpt = False,
                dry_run: DryRunOpt = False, output: OutputOpt = OutputFormat.TABLE,
                debug: DebugOpt = False) -> None:
    """Create a user on a broker (-b) or every broker of a cluster (-c); Normal unless -t."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        secret = _password(password, password_file, required=True) or ""
        mutate(endpoint(namesrv, context),
               lambda admin: ops.create_user(admin, username.strip(), secret, user_type,
                                             broker_addr=b, cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("updateUser", rich_help_panel=PANEL)
def update_user(ctx: typer.Context, username: UserOpt, password: PasswordOpt = None,
                password_file: PasswordFileOpt = None, user_type: UserTypeOpt = None,
                status: Annotated[str | None, typer.Option(
                    "-s", "--userStatus", help="enable or disable.")] = None,
                broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
                namesrv: NamesrvOpt = None, context: ContextOpt = None, yes: YesOpt = False,
                dry_run: DryRunOpt = False, output: OutputOpt = OutputFormat.TABLE,
                debug: DebugOpt = False) -> None:
    """Change a user's password, type or status; what is not given stays."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        secret = _password(password, password_file, required=False)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.update_user(admin, username.strip(), password=secret,
                                             user_type=user_type, status=status,
                                             broker_addr=b, cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("deleteUser", rich_help_panel=PANEL)
def delete_user(ctx: typer.Context, username: UserOpt, broker_addr: BrokerAddrOpt = None,
                cluster: ClusterOpt = None, namesrv: NamesrvOpt = None,
                context: ContextOpt = None, yes: YesOpt = False, dry_run: DryRunOpt = False,
                output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False) -> None:
    """Delete a user and its rules."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.delete_user(admin, username.strip(), broker_addr=b, cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("getUser", rich_help_panel=PANEL)
def get_user(username: UserOpt, broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
             namesrv: NamesrvOpt = None, context: ContextOpt = None,
             output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False) -> None:
    """Show one user (type and status; never the password) on each broker."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        gathered = with_admin(endpoint(namesrv, context), lambda admin: ops.one_user_rows(
            admin, username.strip(), broker_addr=b, cluster=c))
        _show(gathered, output, ops.USER_COLUMNS, "getUser")


@app.command("listUser", rich_help_panel=PANEL)
def list_user(contains: Annotated[str | None, typer.Option(
                  "-f", "--filter", help="Only names containing this.")] = None,
              broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
              namesrv: NamesrvOpt = None, context: ContextOpt = None,
              output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False) -> None:
    """List the users of each broker (never their passwords)."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        gathered = with_admin(endpoint(namesrv, context), lambda admin: ops.user_rows(
            admin, broker_addr=b, cluster=c, contains=contains))
        _show(gathered, output, ops.USER_COLUMNS, "listUser")


def _put_acl(ctx: typer.Context, update: bool, subject: str, resources: str, actions: str,
             source_ip: str | None, decision: str, broker_addr: str | None,
             cluster: str | None, namesrv: str | None, context: str | None, yes: bool,
             dry_run: bool, output: OutputFormat) -> None:
    b, c = one_target(broker_addr, cluster)
    info = ops.acl_info(subject.strip(), _split(resources), _split(actions), _split(source_ip),
                        decision)
    mutate(endpoint(namesrv, context),
           lambda admin: ops.put_acl(admin, info, update=update, broker_addr=b, cluster=c),
           yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("createAcl", rich_help_panel=PANEL)
def create_acl(ctx: typer.Context, subject: SubjectOpt, resources: ResourcesOpt,
               actions: ActionsOpt, decision: DecisionOpt, source_ip: SourceIpOpt = None,
               broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
               namesrv: NamesrvOpt = None, context: ContextOpt = None, yes: YesOpt = False,
               dry_run: DryRunOpt = False, output: OutputOpt = OutputFormat.TABLE,
               debug: DebugOpt = False) -> None:
    """Add rules for a user: the actions on each resource, from the source IPs (any if none).

    An entry on a resource the user already has a rule on replaces that rule (5.3).
    """
    with guarded(debug):
        _put_acl(ctx, False, subject, resources, actions, source_ip, decision, broker_addr,
                 cluster, namesrv, context, yes, dry_run, output)


@app.command("updateAcl", rich_help_panel=PANEL)
def update_acl(ctx: typer.Context, subject: SubjectOpt, resources: ResourcesOpt,
               actions: ActionsOpt, decision: DecisionOpt, source_ip: SourceIpOpt = None,
               broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
               namesrv: NamesrvOpt = None, context: ContextOpt = None, yes: YesOpt = False,
               dry_run: DryRunOpt = False, output: OutputOpt = OutputFormat.TABLE,
               debug: DebugOpt = False) -> None:
    """Replace a user's rules on the given resources (others stay)."""
    with guarded(debug):
        _put_acl(ctx, True, subject, resources, actions, source_ip, decision, broker_addr,
                 cluster, namesrv, context, yes, dry_run, output)


@app.command("deleteAcl", rich_help_panel=PANEL)
def delete_acl(ctx: typer.Context, subject: SubjectOpt, resource: Annotated[
                   str | None, typer.Option("-r", "--resources",
                                            help="Only the rule on this resource.")] = None,
               broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
               namesrv: NamesrvOpt = None, context: ContextOpt = None, yes: YesOpt = False,
               dry_run: DryRunOpt = False, output: OutputOpt = OutputFormat.TABLE,
               debug: DebugOpt = False) -> None:
    """Delete a user's rule on one resource (-r), or all its rules."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        mutate(endpoint(namesrv, context),
               lambda admin: ops.delete_acl(admin, subject.strip(),
                                            resource.strip() if resource else None,
                                            broker_addr=b, cluster=c),
               yes=yes, dry_run=dry_run, output=output, args=params(ctx))


@app.command("getAcl", rich_help_panel=PANEL)
def get_acl(subject: SubjectOpt, broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
            namesrv: NamesrvOpt = None, context: ContextOpt = None,
            output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False) -> None:
    """Show a user's rules on each broker, one row per entry."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        gathered = with_admin(endpoint(namesrv, context), lambda admin: ops.one_acl_rows(
            admin, subject.strip(), broker_addr=b, cluster=c))
        _show(gathered, output, ops.ACL_COLUMNS, "getAcl")


@app.command("listAcl", rich_help_panel=PANEL)
def list_acl(subject: Annotated[str | None, typer.Option(
                 "-s", "--subject", help="Only subjects containing this.")] = None,
             resource: Annotated[str | None, typer.Option(
                 "-r", "--resource", help="Only resources containing this.")] = None,
             broker_addr: BrokerAddrOpt = None, cluster: ClusterOpt = None,
             namesrv: NamesrvOpt = None, context: ContextOpt = None,
             output: OutputOpt = OutputFormat.TABLE, debug: DebugOpt = False) -> None:
    """List the rules of each broker, one row per entry."""
    with guarded(debug):
        b, c = one_target(broker_addr, cluster)
        gathered = with_admin(endpoint(namesrv, context), lambda admin: ops.acl_rows(
            admin, broker_addr=b, cluster=c, subject=subject, resource=resource))
        _show(gathered, output, ops.ACL_COLUMNS, "listAcl")
