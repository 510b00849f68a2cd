#!/usr/bin/env python3
"""A headless `$BROWSER` for Portico's OAuth logins in tests: given the authorization URL, it does
what a user's browser does after the user approves: asks the authorization server (without
following its redirect) and delivers the redirect it answers with to Portico's loopback listener.

The conformance suite's authorization servers approve at once, answering with a redirect to the
`redirect_uri` Portico sent; this script only ever delivers a redirect to 127.0.0.1, the listener's
address, so a wrong `Location` cannot send it elsewhere. Standard library only. Exits non-zero,
saying why on stderr, when there is no redirect or it does not go to loopback.
"""

import sys
import urllib.error
import urllib.parse
import urllib.request


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: browser-follow.py AUTHORIZATION_URL")
    opener = urllib.request.build_opener(NoRedirects)
    try:
        response = opener.open(sys.argv[1], timeout=20)
        status, location = response.status, response.headers.get("Location")
    except urllib.error.HTTPError as answer:
        status, location = answer.code, answer.headers.get("Location")
    if not location:
        raise SystemExit(f"browser-follow: the authorization URL answered {status} without a redirect")
    target = urllib.parse.urlparse(location)
    if target.hostname != "127.0.0.1":
        raise SystemExit(f"browser-follow: refusing to deliver a redirect to {target.hostname}")
    with urllib.request.urlopen(location, timeout=20) as delivered:
        print(f"browser-follow: delivered the redirect ({delivered.status})", file=sys.stderr)


if __name__ == "__main__":
    main()
