def run(x, y):
    raise RuntimeError("kernel exploded on purpose")
