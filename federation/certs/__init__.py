"""Certificates for fedspread's mTLS link and webhooks: the CA, the identity scheme, files, gRPC.

Modules: `pki` (the one CA implementation), `names` (what a certificate says about its holder),
`store` (files on disk), `bundles` (what `fedspread certs` issues), `transport` (gRPC
credentials from files), `cli` (`fedspread certs`).
"""
