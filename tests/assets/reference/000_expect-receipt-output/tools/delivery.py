def main(inputs, ctx):
    return {"delivery": {"status": "awaiting_approval", "sent": False, "digest": inputs["digest"]}}
