"""Scripted controllers for the tests: a fixed decision at every collective, and one that raises."""


class Fixed:
    """Returns `decision` at every collective decision point; records what it was shown."""

    def __init__(self, decision, name="fixed"):
        self.name, self.decision, self.points, self.views = name, decision, [], []

    def reset(self, seed):
        self.points.clear()

    def decide(self, point, view):
        self.points.append(point)
        self.views.append(view)
        return self.decision if point.kind == "collective" else None


class Raises:
    """Raises at every collective decision point."""

    name = "raises"

    def reset(self, seed):
        pass

    def decide(self, point, view):
        if point.kind == "collective":
            raise RuntimeError("boom")
        return None
