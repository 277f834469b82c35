"""``proctor console user add|list|remove``: who may sign in to the web console."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from proctor.console.users import UserBook


def _book() -> UserBook:
    from proctor.console.users import UserBook
    from proctor.runtime.home.files import home_dir

    home, _ = home_dir()
    return UserBook(home)


@click.group("console")
def console() -> None:
    """Manage the people who may sign in to `proctor serve`.

    \b
    Example:
      proctor console user add alice
    """


@console.group("user")
def user() -> None:
    """Add, list or remove console users (tokens are kept hashed in the home).

    \b
    Example:
      proctor console user add alice
    """


@user.command("add")
@click.argument("name")
@click.option("--rotate", is_flag=True, help="Replace an existing user's token.")
def add(name: str, rotate: bool) -> None:
    """Make a sign-in token for NAME and print it once (only its hash is kept).

    Example: proctor console user add alice
    """
    book = _book()
    token = book.add(name, rotate=rotate)
    click.echo(token)
    click.echo(f"the token of {name}: shown this once; keep it like a password", err=True)


@user.command("list")
def list_users() -> None:
    """List console users and when their token was made.

    \b
    Example:
      proctor console user list
    """
    book = _book()
    users = book.list()
    if not users:
        click.echo("no console users yet: proctor console user add NAME")
    for entry in users:
        click.echo(f"{entry.name}  {entry.created_at}")


@user.command("remove")
@click.argument("name")
def remove(name: str) -> None:
    """Remove NAME: their token stops working and their sessions end.

    \b
    Example:
      proctor console user remove alice
    """
    book = _book()
    book.remove(name)
    click.echo(f"removed {name}")
