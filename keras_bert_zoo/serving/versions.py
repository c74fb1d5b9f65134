"""TF Serving's model folder (`MODEL/<version>/`): which names are versions, and how a new one is
published so that two exports at once never take the same number.

A version is a folder named by ASCII digits, as TF Serving reads it (`"²".isdigit()` is True in
Python, but `int("²")` fails and TF Serving skips it): any other name is not a version.

The next version is chosen at the rename that publishes the export, not before the save: the
export is written into a hidden temporary folder beside the versions, then renamed to
`<highest + 1>`. `rename` refuses to replace a folder that holds files, so a second export that
finished meanwhile and took that number makes this one try the next: both are kept, each under
its own number, and a serving process never sees a half-written version.
"""

import errno
import os

TAKEN = (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR)
ATTEMPTS = 1000


def is_version_name(name):
    """Whether `name` names a TF Serving version folder: ASCII digits only."""
    return name.isascii() and name.isdigit()


def version_numbers(path):
    """The version numbers of the version-named entries of folder `path` (none for a missing one), sorted."""
    if not os.path.isdir(path):
        return []
    return sorted(int(n) for n in os.listdir(path) if is_version_name(n))


def publish_next_version(source, base):
    """Renames folder `source` to `base/<highest version + 1>`, trying the next number where another
    writer took one meanwhile (see the module docstring). Returns the path it took.

    Raises:
        OSError: the rename fails for another reason than a taken number.
    """
    for _ in range(ATTEMPTS):
        target = os.path.join(base, str(max(version_numbers(base), default=0) + 1))
        try:
            os.rename(source, target)
            return target
        except OSError as e:
            if e.errno not in TAKEN:
                raise
    raise OSError(errno.EEXIST, f"no free version number after {ATTEMPTS} tries", base)
