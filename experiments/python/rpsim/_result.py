"""The base of the results the check functions return: the C++ core's dict as attributes, truthy
when the check passed (`ok`)."""


class CheckResult:
    def __init__(self, raw):
        self.__dict__.update(raw)

    @property
    def ok(self):
        return self.failed == 0

    def __bool__(self):
        return self.ok
