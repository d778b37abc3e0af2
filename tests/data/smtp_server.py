"""A real SMTP server for the e-mail notification tests: aiosmtpd (Debian's python3-aiosmtpd)
with STARTTLS required and AUTH required over TLS, writing each message it accepts to
OUTDIR/NNNNN.eml with the envelope in X-Envelope-* lines first.

Usage: smtp_server.py PORT OUTDIR CERT KEY USER PASSWORD
Prints "ready" once it listens; runs until killed.
"""

import os
import signal
import ssl
import sys

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

port, outdir, cert, key, user, password = sys.argv[1:7]


class Handler:
    def __init__(self):
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        path = os.path.join(outdir, f"{self.count:05}.eml")
        head = f"X-Envelope-From: {envelope.mail_from}\r\n" + "".join(
            f"X-Envelope-To: {to}\r\n" for to in envelope.rcpt_tos
        )
        with open(path + ".tmp", "wb") as f:
            f.write(head.encode() + envelope.original_content)
        os.rename(path + ".tmp", path)
        return "250 Message accepted for delivery"


def authenticate(server, session, envelope, mechanism, auth_data):
    ok = (
        isinstance(auth_data, LoginPassword)
        and auth_data.login == user.encode()
        and auth_data.password == password.encode()
    )
    # handled=False: aiosmtpd then answers 535 itself (with the default, nothing is sent).
    return AuthResult(success=ok, handled=False)


context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(cert, key)
controller = Controller(
    Handler(),
    hostname="127.0.0.1",
    port=int(port),
    tls_context=context,
    require_starttls=True,
    authenticator=authenticate,
    auth_required=True,
    auth_require_tls=True,
)
controller.start()
print("ready", flush=True)
signal.sigwait({signal.SIGTERM, signal.SIGINT})
controller.stop()
