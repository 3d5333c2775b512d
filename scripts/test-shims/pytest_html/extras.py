"""TEST-ONLY: report extras as plain dicts (nothing renders them)."""


def url(content, name="URL"):
    return {"name": name, "format_type": "url", "content": content}


def html(content):
    return {"name": "HTML", "format_type": "html", "content": content}


def text(content, name="Text"):
    return {"name": name, "format_type": "text", "content": content}
