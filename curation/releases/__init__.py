"""Releases: what a new release of an eval holds, written once, and which items are sealed.

Owns: schedule periods (`periods`), the rotation rules (`rotation`) with the linking core
carried from the release before and the balance of what it adds (`balance`) by composition
(`composition`; what a release records of both: `linking`), the keyed-hash sealed slice
(`sealing`), canonical content, digests and Merkle roots (`content`), the release writer that
puts them together in one transaction of the caller's (`writer`), withdrawing a release
(`withdrawal`), and which items' content must be withheld outside the budgeted sealed paths
(`visibility`).
May use: `schemas`. Seal keys come in from the caller in the clear.
"""
