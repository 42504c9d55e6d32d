"""Bootstrap of `stallprof run`, first on PYTHONPATH: installs the stallprof
DataLoader hook, then runs the sitecustomize this file shadows (Debian ships
one). Never raises into the user's program: at most one warning on stderr."""


def _stallprof_bootstrap():
    import os
    import sys

    if os.environ.get("STALLPROF_RING"):
        try:
            from stallprof import hook
            hook.install()
        except Exception as error:  # pragma: no cover - defensive
            try:
                sys.stderr.write("stallprof: warning: hook not installed (%s: %s); not recording\n"
                                 % (type(error).__name__, error))
            except Exception:
                pass

    # Chain to the sitecustomize we shadow: the next one on sys.path.
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        try:
            if not entry or os.path.abspath(entry) == here:
                continue
            candidate = os.path.join(entry, "sitecustomize.py")
            if not os.path.isfile(candidate):
                continue
        except Exception:
            continue
        try:
            import types
            module = types.ModuleType("sitecustomize")
            module.__file__ = candidate
            with open(candidate, "rb") as source:
                code = compile(source.read(), candidate, "exec")
            # The user's module, not this bootstrap, is `sitecustomize` from
            # now on: `import sitecustomize` in the job finds it. (The import
            # system returns whatever sys.modules holds once this file ends.)
            sys.modules["sitecustomize"] = module
            exec(code, module.__dict__)
        except Exception as error:
            # Python itself reports a failing sitecustomize the same way.
            try:
                sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n"
                                 % (type(error).__name__, error))
            except Exception:
                pass
        break


_stallprof_bootstrap()
del _stallprof_bootstrap
