import asyncio

from django import forms
from django.contrib import messages
from django.shortcuts import redirect, render


def hello(request, name):
    """A sync template view (Django runs it in asgiref's thread): the name,
    autoescaped, and a loop over a list."""
    return render(request, "asgi_django/hello.html", {"name": name, "items": ["one", "two", "three"]})


async def async_hello(request, name):
    """The same template from an async view that awaits on the loop."""
    await asyncio.sleep(0.01)
    return render(request, "asgi_django/hello.html", {"name": name, "items": ["one", "two", "three"]})


class MessageForm(forms.Form):
    message = forms.CharField(max_length=100)


def message_form(request):
    """GET: the form with a CSRF token. POST: valid → 302 to thanks (with a
    flash message in a cookie), invalid → 200 with the form's errors."""
    if request.method == "POST":
        form = MessageForm(request.POST)
        if form.is_valid():
            messages.success(request, "Got: " + form.cleaned_data["message"])
            return redirect("thanks")
    else:
        form = MessageForm()
    return render(request, "asgi_django/form.html", {"form": form})


def thanks(request):
    return render(request, "asgi_django/thanks.html")
